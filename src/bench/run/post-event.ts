import http from 'node:http';

export interface PostAnswer {
  /** The HTTP status, 0 when no answer came (connection error or timeout). */
  status: number;
  body: string;
}

/**
 * POST one event body on a fresh connection from the loopback address `from` (the gateway
 * tells clients apart by address), with a deadline.
 */
export function postEvent(
  url: string,
  body: string,
  from: string,
  timeoutMs = 10_000,
): Promise<PostAnswer> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        localAddress: from,
        agent: false,
        timeout: timeoutMs,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          // Answers are small JSON; a large one is not read past what tells the outcome.
          if (text.length < 4096) text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', () => resolve({ status: 0, body: '' }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end(body);
  });
}
