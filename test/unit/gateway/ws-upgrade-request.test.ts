/**
 * The upgrade checks the gateway makes before opening a relay socket must refuse exactly what
 * ws's WebSocketServer would: a request refused only by ws used to leak one relay socket, and
 * one refused only by the gateway would turn away a client ws accepts. Checked over generated
 * requests against ws itself; plus the per-address slots and close reasons.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { Duplex } from 'node:stream';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { WebSocketServer } from 'ws';
import { AddressSlots } from '../../../src/gateway/address-slots.js';
import { checkUpgradeRequest } from '../../../src/gateway/upgrade-request.js';
import { closeReason } from '../../../src/gateway/ws-connection.js';

/** A socket that takes whatever is written; enough for ws to answer or accept a handshake. */
function fakeSocket(): Duplex & { written: string } {
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, done) {
      socket.written += chunk.toString('latin1');
      done();
    },
  }) as Duplex & { written: string; setTimeout(): void; setNoDelay(): void };
  socket.written = '';
  socket.setTimeout = () => undefined;
  socket.setNoDelay = () => undefined;
  return socket;
}

/** Whether ws's server accepts this request (calls back) or answers it with an error. */
function wsAccepts(wss: WebSocketServer, req: IncomingMessage): boolean {
  const socket = fakeSocket();
  let accepted = false;
  wss.handleUpgrade(req, socket, Buffer.alloc(0), (ws) => {
    accepted = true;
    ws.terminate();
  });
  socket.destroy();
  return accepted;
}

function requestOf(method: string, headers: Record<string, string>): IncomingMessage {
  return { method, headers, url: '/', socket: {} } as unknown as IncomingMessage;
}

const key = fc.oneof(
  fc.constant('dGhlIHNhbXBsZSBub25jZQ=='),
  fc.uint8Array({ minLength: 0, maxLength: 20 }).map((b) => Buffer.from(b).toString('base64')),
  fc.string({ maxLength: 30 }),
);
const version = fc.oneof(
  fc.constantFrom('13', '8', ' 13', '13.0', '0x0d', '12', '', '1e1'),
  fc.string({ maxLength: 4 }),
);
const protocol = fc.oneof(
  fc.constantFrom('nostr', 'a, b', 'a,a', 'a,,b', ' a ', 'a b', 'a;b', ''),
  fc.string({ maxLength: 12 }),
);
const upgrade = fc.constantFrom('websocket', 'WebSocket', 'h2c', 'websocket, h2c', '');

describe('upgrade requests: the gateway refuses what ws would', { timeout: 60_000 }, () => {
  it('agrees with ws over generated requests', () => {
    const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
    fc.assert(
      fc.property(
        fc.constantFrom('GET', 'GET', 'GET', 'POST', 'HEAD'),
        fc.record(
          {
            upgrade,
            'sec-websocket-key': key,
            'sec-websocket-version': version,
            'sec-websocket-protocol': protocol,
          },
          { requiredKeys: [] },
        ),
        (method, headers) => {
          const req = requestOf(method, headers);
          const refusal = checkUpgradeRequest(req);
          assert.equal(refusal === undefined, wsAccepts(wss, req), JSON.stringify(refusal));
        },
      ),
      { numRuns: 2000 },
    );
    wss.close();
  });

  it('answers 405 to other methods and names the versions it speaks', () => {
    const headers = { upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    assert.equal(checkUpgradeRequest(requestOf('POST', headers))?.status, 405);
    const noVersion = checkUpgradeRequest(requestOf('GET', headers));
    assert.equal(noVersion?.status, 400);
    assert.equal(noVersion?.headers?.['sec-websocket-version'], '13, 8');
  });
});

describe('connections per address', { timeout: 10_000 }, () => {
  it('holds at most the bound per address, and forgets an address that holds none', () => {
    const slots = new AddressSlots(2);
    const a1 = slots.acquire('a');
    const a2 = slots.acquire('a');
    assert.ok(a1 && a2);
    assert.equal(slots.acquire('a'), undefined);
    assert.ok(slots.acquire('b'), 'another address has its own slots');
    a1();
    a1(); // releasing twice gives back one slot only
    assert.equal(slots.count('a'), 1);
    assert.ok(slots.acquire('a'));
    assert.equal(slots.acquire('a'), undefined);
  });
});

describe('close reasons', { timeout: 10_000 }, () => {
  it('fit in 123 bytes of whole characters', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (reason) => {
        const cut = closeReason(reason);
        assert.ok(Buffer.byteLength(cut) <= 123);
        assert.ok(reason.startsWith(cut));
        assert.equal(Buffer.from(cut).toString('utf8'), cut, 'valid UTF-8');
      }),
      { numRuns: 500 },
    );
  });
});
