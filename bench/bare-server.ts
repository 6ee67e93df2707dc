/**
 * The bench's baseline: a bare node:http server answering with the exact bytes and content-type the real
 * list route sent. Run as a child process (like the real server) so autocannon, which runs in the bench
 * process, does not share its event loop. The parent sends { body, contentType } over IPC and gets { port }.
 *   GET /raw        → the pre-serialised bytes
 *   GET /stringify  → JSON.stringify(JSON.parse(text)) on every request
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface Setup {
  body: string;
  contentType: string;
}

function start({ body, contentType }: Setup): void {
  const raw = Buffer.from(body, 'utf8');
  const server = http.createServer((req, res) => {
    if (req.url === '/stringify') {
      const text = JSON.stringify(JSON.parse(body));
      res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) }).end(text);
      return;
    }
    res.writeHead(200, { 'content-type': contentType, 'content-length': raw.length }).end(raw);
  });
  server.keepAliveTimeout = 60_000;
  const stop = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1_000).unref();
  };
  process.on('disconnect', stop);
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

process.once('message', (message: Setup) => start(message));
process.on('SIGTERM', () => process.exit(0));
