// Starts a real redlite-server for a test on a free loopback port and stops it with SIGTERM,
// checking that it exits cleanly. The binary and model come from the environment (set by CTest):
// REDLITE_SERVER and REDLITE_MODEL.
import { spawn } from 'node:child_process';

export const serverBinary = process.env.REDLITE_SERVER;
export const modelPath = process.env.REDLITE_MODEL;

export async function startServer(extraArgs = []) {
  if (!serverBinary || !modelPath) throw new Error('set REDLITE_SERVER and REDLITE_MODEL');
  const args = ['-m', modelPath, '--host', '127.0.0.1', '--port', '0', '-t', '1', ...extraArgs];
  const child = spawn(serverBinary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    port,
    log: () => log,
    async stop() {
      const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
      child.kill('SIGTERM');
      const result = await Promise.race([
        exited,
        new Promise((r) => setTimeout(() => r({ code: 'timeout' }), 15000)),
      ]);
      if (result.code === 'timeout') child.kill('SIGKILL');
      if (result.code !== 0) throw new Error(`server did not exit cleanly (${JSON.stringify(result)}):\n${log}`);
    },
  };
}

export async function health(base) {
  return (await fetch(`${base}/health`)).json();
}

// Waits until no session is busy (a cancelled request must free its slot quickly).
export async function waitIdle(base, ms = 3000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const h = await health(base);
    if (h.slots_busy === 0 && h.queued === 0) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}
