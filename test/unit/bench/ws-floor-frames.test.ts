import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { clientFrames } from '../../../src/bench/ws-floor.js';
import {
  FLOOR_SHAPES,
  IMPLEMENTATIONS,
  floorShape,
  isWsFloor,
} from '../../../src/bench/run/config.js';

/**
 * What a real ws client puts on the wire for `messages`: its upgrade request, then each message
 * as a masked frame (ws chooses the length form and a fresh mask), as a server receives them.
 */
async function clientBytes(messages: string[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  const server = createServer((socket) => {
    socket.on('data', (chunk: Buffer) => {
      if (chunks.length === 0) {
        const key = /sec-websocket-key: *(\S+)/i.exec(chunk.toString('latin1'))![1]!;
        const accept = createHash('sha1')
          .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
          .digest('base64');
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
        );
      }
      chunks.push(chunk);
      total += chunk.length;
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
  try {
    await once(ws, 'open');
    const head = total;
    const framed = messages.reduce((n, m) => n + frameSize(Buffer.byteLength(m)), 0);
    for (const m of messages) ws.send(m);
    const deadline = Date.now() + 5_000;
    while (total - head < framed && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1));
    }
    assert.equal(total - head, framed, 'the client sent every message, and nothing else');
    return Buffer.concat(chunks);
  } finally {
    ws.terminate();
    server.close();
  }
}

/** A masked frame's size on the wire: its header, the length's extension, the mask, the payload. */
function frameSize(payload: number): number {
  const extension = payload < 126 ? 0 : payload < 65_536 ? 2 : 8;
  return 2 + extension + 4 + payload;
}

/** A deterministic generator (mulberry32), so a failing cut can be run again. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('the frames floor reads a client stream cut anywhere', { timeout: 30_000 }, () => {
  it('passes every byte on, in order, once, and unmasks every payload, for any cut of the chunks', async () => {
    // Each length form: 7-bit (0, 1, 125), 16-bit (126, 65,535) and 64-bit (65,536 and over).
    const sizes = [0, 1, 5, 125, 126, 400, 65_535, 65_536, 70_001];
    const messages = sizes.map((n, i) => String.fromCharCode(97 + (i % 26)).repeat(n));
    messages.push(JSON.stringify(['EVENT', { id: 'é'.repeat(32), content: 'ünïcode' }]));
    const wire = await clientBytes(messages);
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed);
      const passed: Buffer[] = [];
      const payloads: string[] = [];
      const read = clientFrames(
        (bytes) => passed.push(Buffer.from(bytes)),
        (payload) => payloads.push(payload.toString('utf8')),
      );
      // Cuts from 1 byte (inside a header, a mask, the upgrade's last CRLF) up to 4 KiB.
      for (let at = 0; at < wire.length;) {
        const size = Math.max(1, Math.floor(next() ** 3 * 4096));
        read(wire.subarray(at, at + size));
        at += size;
      }
      assert.ok(Buffer.concat(passed).equals(wire), `seed ${seed}: the bytes passed on`);
      assert.deepEqual(payloads, messages, `seed ${seed}: the payloads read`);
    }
  });

  it('holds a frame that is not whole, and passes nothing of it until it is', async () => {
    const wire = await clientBytes(['x'.repeat(300)]);
    const passed: Buffer[] = [];
    const read = clientFrames((bytes) => passed.push(Buffer.from(bytes)));
    read(wire.subarray(0, wire.length - 1));
    const head = wire.indexOf('\r\n\r\n') + 4;
    // The upgrade request went on; the frame waits for its last byte.
    assert.equal(Buffer.concat(passed).length, head);
    read(wire.subarray(wire.length - 1));
    assert.ok(Buffer.concat(passed).equals(wire));
  });

  it('asks for the client to be cut once it holds more than its bound, head or frame', async () => {
    const wire = await clientBytes(['y'.repeat(1_000)]);
    const head = wire.indexOf('\r\n\r\n') + 4;
    // A frame of 1,000 bytes under a bound of 500: fine while what waits is under it.
    const read = clientFrames(() => {}, undefined, 500);
    assert.equal(read(wire.subarray(0, head + 400)), true);
    assert.equal(read(wire.subarray(head + 400, head + 600)), false);
    // An upgrade request that never ends is held only up to the bound.
    const endless = clientFrames(() => {}, undefined, 500);
    assert.equal(endless(Buffer.from('GET / HTTP/1.1\r\n' + 'x-a: b\r\n'.repeat(40))), true);
    assert.equal(endless(Buffer.from('x-a: b\r\n'.repeat(40))), false);
  });
});

describe('the floors by name', { timeout: 5_000 }, () => {
  it('every ws-floor implementation starts a shape the floor has, and each shape has one', () => {
    const floors = IMPLEMENTATIONS.filter(isWsFloor);
    const shapes = floors.map(floorShape);
    for (const shape of shapes) assert.ok(FLOOR_SHAPES.includes(shape), shape);
    assert.deepEqual([...shapes].sort(), [...FLOOR_SHAPES].sort());
  });
});
