/**
 * TurnWrites on real loopback sockets: what one callback writes to a socket leaves in one
 * socket write, in order, once the callback is done; nothing waits past it; an ended socket
 * still sends what it held and a destroyed one does not stop the others. And which relay
 * messages the pump holds: a subscription's events, never an OK.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Socket, createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { TurnWrites } from '../../../src/gateway/turn-writes.js';
import fc from 'fast-check';
import { isCompactEvent } from '../../../src/gateway/ws-connection.js';
import { startsCompactEvent } from '../../../src/nostr/message-heads.js';

/** A connected pair: `near` is written to, `far` collects what arrives. */
interface Pair {
  near: Socket;
  received: () => string;
  ended: Promise<unknown>;
  /** The socket writes `near` made so far: one per _write or _writev call. */
  writes: () => number;
}

let server: Server;
const accepted: Socket[] = [];

before(async () => {
  server = createServer((s) => accepted.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});

after(async () => {
  for (const s of accepted) s.destroy();
  server.close();
  await once(server, 'close');
});

async function pair(): Promise<Pair> {
  const { port } = server.address() as AddressInfo;
  const count = accepted.length;
  const near = new Socket();
  near.connect(port, '127.0.0.1');
  await once(near, 'connect');
  const deadline = Date.now() + 5000;
  while (accepted.length === count) {
    if (Date.now() > deadline) throw new Error('the server never accepted');
    await new Promise((r) => setTimeout(r, 5));
  }
  const far = accepted[accepted.length - 1]!;
  let text = '';
  far.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  const ended = once(far, 'end');
  let writes = 0;
  // Count the stream's calls into the socket: each is one system call's worth of bytes.
  const write = near._write.bind(near);
  const writev = near._writev!.bind(near);
  near._write = (...args: Parameters<Socket['_write']>) => {
    writes++;
    write(...args);
  };
  near._writev = (...args: Parameters<NonNullable<Socket['_writev']>>) => {
    writes++;
    writev(...args);
  };
  return { near, received: () => text, ended, writes: () => writes };
}

/** Wait for `cond`, failing after a deadline. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A frame as ws writes one: header and payload corked together. */
function frame(socket: Socket, text: string): void {
  socket.cork();
  socket.write(Buffer.from([0x81, text.length]));
  socket.write(text);
  socket.uncork();
}

describe('TurnWrites', { timeout: 30_000 }, () => {
  it('sends the frames of one callback in one socket write, in order, when it is done', async () => {
    const turn = new TurnWrites();
    const p = await pair();
    const texts = Array.from({ length: 50 }, (_, i) => `frame ${i};`);
    for (const text of texts) {
      turn.hold(p.near);
      frame(p.near, text);
    }
    assert.equal(p.writes(), 0, 'nothing written while the callback runs');
    assert.ok(p.near.writableLength > 0, 'the frames are held');
    await new Promise((r) => setImmediate(r));
    assert.equal(p.writes(), 1, 'one write for the whole callback');
    const expected = texts.map((t) => String.fromCharCode(0x81, t.length) + t).join('');
    await until(() => p.received().length >= expected.length, 'every byte');
    assert.equal(p.received(), expected);
    p.near.destroy();
  });

  it('holds nothing past its callback: the next one writes again', async () => {
    const turn = new TurnWrites();
    const p = await pair();
    turn.hold(p.near);
    frame(p.near, 'first');
    await new Promise((r) => setImmediate(r));
    turn.hold(p.near);
    frame(p.near, 'second');
    await new Promise((r) => setImmediate(r));
    assert.equal(p.writes(), 2);
    await until(() => p.received().endsWith('second'), 'the second frame');
    assert.equal(p.near.writableCorked, 0, 'not left corked');
    p.near.destroy();
  });

  it('sends what an ended socket held; a destroyed one does not stop the others', async () => {
    const turn = new TurnWrites();
    const [ending, dying, living] = [await pair(), await pair(), await pair()];
    for (const p of [ending, dying, living]) {
      turn.hold(p.near);
      frame(p.near, 'held');
    }
    ending.near.end();
    dying.near.destroy();
    await new Promise((r) => setImmediate(r));
    await ending.ended;
    assert.ok(ending.received().endsWith('held'), 'the ended socket sent what it held');
    await until(() => living.received().endsWith('held'), 'the living socket');
    assert.equal(living.near.writableCorked, 0);
    // A socket no longer writable is not held again.
    turn.hold(ending.near);
    turn.hold(dying.near);
    assert.equal(ending.near.writableCorked, 0);
    living.near.destroy();
  });
});

describe('the relay messages the pump holds', { timeout: 10_000 }, () => {
  it("holds a subscription's events and nothing that answers a write", () => {
    const held = (text: string) => isCompactEvent(Buffer.from(text));
    assert.equal(held('["EVENT","sub",{"id":"00"}]'), true);
    for (const other of [
      '["OK","00",true,""]',
      '["EOSE","sub"]',
      '["NOTICE","x"]',
      '["CLOSED","sub",""]',
      '["AUTH","challenge"]',
      '["EVENTS"]',
      '[ "EVENT","sub",{}]',
      '["EVEN',
      '',
    ]) {
      assert.equal(held(other), false, other);
    }
    assert.equal(isCompactEvent([Buffer.from('["EVENT"'), Buffer.from(',"s",{}]')]), false);
  });

  it('tells `["EVENT"` by its bytes exactly as by its text, whatever follows or precedes', () => {
    const head = Buffer.from('["EVENT"');
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 12 }),
        fc.nat({ max: 8 }),
        fc.uint8Array({ maxLength: 12 }),
        (before, cut, after) => {
          // Around the head, inside it, or cut short: any byte may break it.
          const data = Buffer.concat([before, head.subarray(0, cut), after]);
          const expected = data.toString('latin1').startsWith('["EVENT"');
          assert.equal(startsCompactEvent(data), expected);
          assert.equal(isCompactEvent(data), expected);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
