/**
 * The abuse of scenario 6 (bench/abuse.ts) in a process of its own, so that the process measuring the list
 * route and /healthz is not also the one writing 10 MB bodies: `node --import tsx bench/abuser.ts PORT KEY`,
 * forked with an IPC channel. It starts 10 clients sending 10 MB bodies back to back, 500 idle connections and
 * 20 slow-body connections, sends `'started'`, and on `'stop'` ends them and sends its AbuseStats.
 */
import net from 'node:net';
import { pathToFileURL } from 'node:url';

export const BIG_BODY_CLIENTS = 10;
export const BIG_BODY_BYTES = 10 * 1024 * 1024;
export const IDLE_CONNECTIONS = 500;
export const SLOW_CONNECTIONS = 20;

export interface AbuseStats {
  bigBodies: { sent: number; answers: Record<string, number> };
  idleClosedByServer: number;
  slowClosedByServer: number;
}

/**
 * One client sending 10 MB bodies back to back on new connections: half to the upload route (15 MB limit:
 * parsed, then refused by validation), half chunked to a 1 MB route (refused while streaming).
 */
function bigBodySender(port: number, key: string, upload: boolean, stats: { sent: number; answers: Record<string, number> }, isRunning: () => boolean): Promise<void> {
  const text = 'x'.repeat(BIG_BODY_BYTES);
  const body = Buffer.from(JSON.stringify({ sourceType: 'text', title: 'big', text }));
  const head = upload
    ? `POST /m2m/v1/knowledge/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    : `POST /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
  const one = () =>
    new Promise<void>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let answer = '';
      socket.setTimeout(30_000, () => socket.destroy());
      socket.on('data', (chunk) => {
        if (answer.length < 64) answer += chunk.toString('latin1');
        // An HTTP client keeps its side open until the answer (Node's server drops a request whose client half-closed).
        if (/^HTTP\/1\.1 \d{3}/.test(answer)) socket.end();
      });
      socket.on('error', () => undefined);
      socket.on('close', () => {
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed';
        stats.answers[status] = (stats.answers[status] ?? 0) + 1;
        resolve();
      });
      socket.write(head);
      if (upload) socket.write(body);
      else {
        for (let offset = 0; offset < body.length && !socket.destroyed; offset += 1024 * 1024) {
          const chunk = body.subarray(offset, offset + 1024 * 1024);
          socket.write(`${chunk.length.toString(16)}\r\n`);
          socket.write(chunk);
          socket.write('\r\n');
        }
        socket.write('0\r\n\r\n');
      }
      stats.sent += 1;
    });
  return (async () => {
    while (isRunning()) await one();
  })();
}

/** Connections that connect and send nothing; counts those the server closes. */
function idleConnections(port: number, count: number): { sockets: net.Socket[]; closedByServer: () => number } {
  let closed = 0;
  const sockets = Array.from({ length: count }, () => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('end', () => (closed += 1));
    return socket;
  });
  return { sockets, closedByServer: () => closed };
}

/** Connections that announce a 1 MB body and send one byte every 500 ms. */
function slowBodies(port: number, key: string, count: number): { sockets: net.Socket[]; closedByServer: () => number; stop: () => void } {
  let closed = 0;
  const timers: NodeJS.Timeout[] = [];
  const sockets = Array.from({ length: count }, () => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('end', () => (closed += 1));
    socket.write(`POST /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{`);
    timers.push(setInterval(() => !socket.destroyed && socket.write(' '), 500));
    return socket;
  });
  return { sockets, closedByServer: () => closed, stop: () => timers.forEach(clearInterval) };
}

async function main(): Promise<void> {
  const [portArg, key] = process.argv.slice(2);
  const port = Number(portArg);
  let running = true;
  const bigBodies = { sent: 0, answers: {} as Record<string, number> };
  const senders = Array.from({ length: BIG_BODY_CLIENTS }, (_, i) => bigBodySender(port, key, i % 2 === 0, bigBodies, () => running));
  const idle = idleConnections(port, IDLE_CONNECTIONS);
  const slow = slowBodies(port, key, SLOW_CONNECTIONS);
  process.send?.('started');
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
  running = false;
  const stats: AbuseStats = { bigBodies, idleClosedByServer: idle.closedByServer(), slowClosedByServer: slow.closedByServer() };
  slow.stop();
  for (const socket of [...idle.sockets, ...slow.sockets]) socket.destroy();
  await Promise.all(senders);
  process.send?.(stats, () => process.exit(0));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
