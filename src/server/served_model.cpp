#include "server/served_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "gguf/gguf.h"
#include "util/error.h"
#include "util/log.h"

namespace rl::server {

bool ServedModel::answers_to(const std::string& name) const {
  if (name == id) return true;
  return std::any_of(aliases.begin(), aliases.end(),
                     [&](const std::string& a) { return a == "*" || a == name; });
}

void derive_token_fields(ServedModel& model) {
  const auto& tok = *model.tokenizer;
  model.message_start = tok.find_token("<|im_start|>");
  model.end_tokens.clear();
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_end_of_generation(id)) model.end_tokens.push_back(id);
}

ServedModel load_served_model(const std::string& path, const LoadOptions& options,
                              const engine::Progress& progress) {
  ServedModel model;
  model.path = path;
  std::error_code ec;
  model.file_bytes = std::filesystem::file_size(path, ec);
  model.id = std::filesystem::path(path).stem().string();
  std::string template_text;
  {
    const gguf::File file = gguf::File::open(path);
    model.tokenizer = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
    template_text = file.get_string("tokenizer.chat_template").value_or("");
    if (auto name = file.get_string("general.name"); name && !name->empty() && *name != model.id)
      model.aliases.push_back(*name);
  }
  model.family = chat::detect_family(template_text);
  model.engine = engine::load_engine(path, options.engine, progress);
  model.trained_context = model.engine->config().context_length;
  model.context = options.context > 0 ? options.context : model.trained_context;
  if (model.context <= 0) fail(path, ": the model declares no context length; pass --ctx");
  if (model.tokenizer->n_vocab() > model.engine->config().n_vocab)
    fail(path, ": the tokenizer has ", model.tokenizer->n_vocab(), " tokens but the model only ",
         model.engine->config().n_vocab, " embeddings");
  for (const auto& a : options.aliases) model.aliases.push_back(a);
  derive_token_fields(model);
  model.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return model;
}

}  // namespace rl::server
