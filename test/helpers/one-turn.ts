import assert from 'node:assert/strict';
import net from 'node:net';
import type { Socket } from 'node:net';

/**
 * Issue `count` commands from as many sockets' data events arriving in one event-loop turn,
 * as a loaded gateway issues them (one per frame read), and return their answers in order.
 */
export async function commandsFromOneTurn(
  issue: (i: number) => Promise<unknown>,
  count = 50,
): Promise<unknown[]> {
  const answers: Promise<unknown>[] = [];
  let accepted = 0;
  const server = net.createServer((conn) => {
    accepted++;
    conn.on('data', () => {
      answers.push(issue(answers.length));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const senders = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  try {
    const deadline = Date.now() + 10_000;
    // Every connection accepted first, so the bytes arrive in one turn.
    while (accepted < senders.length) {
      assert.ok(Date.now() < deadline, `${accepted} of ${count} connections accepted`);
      await new Promise((r) => setTimeout(r, 5));
    }
    for (const s of senders) s.write('x');
    while (answers.length < senders.length) {
      assert.ok(Date.now() < deadline, `${answers.length} of ${count} data events arrived`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return await Promise.all(answers);
  } finally {
    for (const s of senders) s.destroy();
    server.close();
  }
}
