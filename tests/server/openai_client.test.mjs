// redlite-server through the official openai npm client, as an application would use it:
// chat, streaming, tools, usage, prefix reuse, errors and aborts. The tiny test model has
// random weights, so these tests check the protocol and the server's guarantees, not the text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, waitIdle } from './harness.mjs';

let server;
let client;
const model = 'tiny-f32';

before(async () => {
  server = await startServer(['--parallel', '2']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.stop();
});

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

test('models.list names the served model', async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, model);
});

test('chat completion has the OpenAI shape and usage', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }],
    max_tokens: 12,
    temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('streamed deltas concatenate to the non-streamed greedy answer', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story about a robot. ÄÖÜ 漢字 🤖' }];
  const full = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 2);
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
});

test('a follow-up turn resumes from saved state (cached_tokens > 0)', async () => {
  const messages = [{ role: 'user', content: 'First question about prefix reuse in servers?' }];
  const first = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  messages.push({ role: 'assistant', content: first.choices[0].message.content });
  messages.push({ role: 'user', content: 'And a second one?' });
  const second = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1);
});

test('tools: requests with tools, tool_choice and tool results are answered well-formed', async () => {
  for (const tool_choice of ['auto', 'required', { type: 'function', function: { name: 'get_weather' } }, 'none']) {
    const r = await client.chat.completions.create({
      model, tools: [weatherTool], tool_choice, max_tokens: 16, temperature: 0,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    const choice = r.choices[0];
    assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason));
    if (choice.finish_reason === 'tool_calls') {
      for (const call of choice.message.tool_calls) {
        assert.equal(call.type, 'function');
        assert.equal(call.function.name, 'get_weather');
        JSON.parse(call.function.arguments);
      }
    } else {
      // A random model's malformed call comes back as text, never as an error.
      assert.equal(typeof choice.message.content, 'string');
    }
  }
  // A conversation that already holds a call and its result.
  const r = await client.chat.completions.create({
    model, tools: [weatherTool], max_tokens: 8, temperature: 0,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' },
    ],
  });
  assert.equal(r.choices[0].message.role, 'assistant');
  // Streaming with tools through the client's helper.
  const stream = await client.chat.completions.create({
    model, tools: [weatherTool], max_tokens: 16, temperature: 0, stream: true,
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const call of c.delta.tool_calls ?? []) assert.equal(typeof call.index, 'number');
      finish = c.finish_reason ?? finish;
    }
  }
  assert.ok(['stop', 'length', 'tool_calls'].includes(finish));
});

test('logprobs and logit_bias are honoured', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, temperature: 0,
    logprobs: true, top_logprobs: 3, logit_bias: { 66: 100 },
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 4);
  for (const entry of lp) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
  }
  assert.equal(r.choices[0].message.content, 'cccc');  // token 66 is "c" in the tiny vocabulary
});

test('invalid requests raise the client error classes', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], n: 3 }),
    (e) => e.status === 400 && /'n'/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x'.repeat(20000) }] }),
    (e) => e.status === 400 && /context/.test(e.message));
});

test('aborting a stream frees its session', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    {
      model, messages: [{ role: 'user', content: 'Go on forever' }], max_tokens: 3000, stream: true,
      logit_bias: { 509: -100, 510: -100, 511: -100 },  // no end-of-turn token: it would go on
    },
    { signal: controller.signal });
  let seen = 0;
  try {
    for await (const _ of stream) {
      if (++seen === 3) controller.abort();  // the client ends the iteration quietly
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.ok(seen >= 3 && seen < 100, `saw ${seen} chunks`);
  assert.ok(await waitIdle(server.base), 'the session stayed busy after the client left');
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  assert.equal(r.choices.length, 1);
});

test('the API key is enforced by a server started with one', async () => {
  const locked = await startServer(['--api-key', 'k3y']);
  try {
    const bad = new OpenAI({ baseURL: `${locked.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
    const good = new OpenAI({ baseURL: `${locked.base}/v1`, apiKey: 'k3y', maxRetries: 0 });
    assert.equal((await good.models.list()).data[0].id, model);
  } finally {
    await locked.stop();
  }
});
