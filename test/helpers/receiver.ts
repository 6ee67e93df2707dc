import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export type Behaviour = (req: http.IncomingMessage, res: http.ServerResponse, received: Received) => void;

/** A real HTTP receiver on 127.0.0.1 whose answer each test chooses. */
export async function startReceiver(behaviour: Behaviour = (_req, res) => res.writeHead(200).end('ok')) {
  const received: Received[] = [];
  let current = behaviour;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const entry = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(entry);
      current(req, res, entry);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    setBehaviour(next: Behaviour) {
      current = next;
    },
    eventIds(): string[] {
      return received.map((r) => String(r.headers['x-service-event-id']));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
