/**
 * A benchmark session's own record (`session.json` in its results directory): the command,
 * the machine, the versions and the settings every run of it shares. Written by the harness
 * (`sluice bench session`, called by run-all.sh), read by the report as it is; README.md
 * beside it is the same record for people.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { environment } from './environment.js';

export const SessionSchema = z.strictObject({
  schema: z.literal('sluice-bench-session/1'),
  command: z.string(),
  startedAt: z.string(),
  machine: z.record(z.string(), z.unknown()),
  versions: z.record(z.string(), z.string()),
  /** What every run of the session shares, in the words run-all.sh shows them. */
  settings: z.record(z.string(), z.string()),
});
export type Session = z.infer<typeof SessionSchema>;

/** The session's record for people: what README.md in the results directory says. */
export function sessionReadme(s: Session, title: string): string {
  const lines = [`# sluice benchmark run ${title}`, '', `Command: \`${s.command}\``, ''];
  lines.push('## Machine', ...Object.entries(s.machine).map(([k, v]) => `- ${k}: ${String(v)}`));
  lines.push('', '## Versions', ...Object.entries(s.versions).map(([k, v]) => `- ${k} ${v}`));
  lines.push('', '## Settings', ...Object.entries(s.settings).map(([k, v]) => `- ${k}: ${v}`));
  return lines.join('\n') + '\n';
}

/** Write session.json and README.md into `dir`; returns the session. */
export async function writeSession(
  dir: string,
  command: string,
  settings: Record<string, string>,
): Promise<Session> {
  const session = SessionSchema.parse({
    schema: 'sluice-bench-session/1',
    command,
    startedAt: new Date().toISOString(),
    ...(await environment()),
    settings,
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'session.json'), JSON.stringify(session, null, 2) + '\n');
  writeFileSync(path.join(dir, 'README.md'), sessionReadme(session, path.basename(dir)));
  return session;
}
