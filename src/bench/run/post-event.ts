import http from 'node:http';

export interface PostAnswer {
  /** The HTTP status, 0 when no answer came (connection error or timeout). */
  status: number;
  /** The answer's body, its first 4 KiB at most ('' when none came). */
  body: string;
  /** Why no answer came. */
  error?: string;
  /**
   * No answer came because a kept-alive socket reused for this request was reset (the race
   * Node's documentation describes: the server closed it as it was reused). Nothing reached
   * the server: the request may be tried once more on a new socket.
   */
  reusedSocketReset?: boolean;
}

export interface PostOptions {
  /** A keep-alive agent to send through; by default a fresh connection per request. */
  agent?: http.Agent;
  timeoutMs?: number;
}

/**
 * POST one event body from the loopback address `from` (the gateway tells clients apart by
 * address), with a deadline.
 */
export function postEvent(
  url: string,
  body: string,
  from: string,
  { agent, timeoutMs = 10_000 }: PostOptions = {},
): Promise<PostAnswer> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        localAddress: from,
        agent: agent ?? false,
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
        res.on('error', (err) => resolve({ status: 0, body: '', error: err.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) =>
      resolve({
        status: 0,
        body: '',
        error: err.message,
        reusedSocketReset: req.reusedSocket && err.code === 'ECONNRESET',
      }),
    );
    req.end(body);
  });
}
