/** A relay of a test's own for nostr.trust's reader: it answers REQs as the test says. */
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';

/**
 * Each REQ is answered by `answers` with the authors asked: `send` sends a frame with `$SUB`
 * replaced by the REQ's id; `socket` is the connection (to cut it mid-answer).
 */
export async function followListRelay(
  answers: (authors: string[], send: (frame: string) => void, socket: WebSocket) => void,
) {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => wss.once('listening', resolve));
  wss.on('connection', (socket) => {
    socket.on('error', () => undefined);
    socket.on('message', (data) => {
      const msg = JSON.parse((data as Buffer).toString('utf8')) as unknown[];
      if (msg[0] !== 'REQ') return;
      const subId = msg[1] as string;
      const filter = msg[2] as { authors: string[] };
      answers(filter.authors, (frame) => socket.send(frame.replace('$SUB', subId)), socket);
    });
  });
  return {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    close: () => {
      for (const c of wss.clients) c.terminate();
      wss.close();
    },
  };
}
