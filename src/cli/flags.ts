/** Flag parsers shared by the commands: each throws commander's InvalidArgumentError. */
import { InvalidArgumentError, Option } from 'commander';
import { RELAY_IMPLS } from '../bench/run/config.js';
import type { RelayImpl } from '../bench/run/config.js';
import { CLIENT_KINDS, DEFAULT_CLIENT, TOPOLOGIES } from '../store/options.js';
import type { ClientKind } from '../store/options.js';

const UNITS: Record<string, number> = {
  '': 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** A byte count: an integer, optionally with a binary unit (64KiB, 2MiB, 1g). */
export function parseBytes(value: string): number {
  const m = /^(\d+)\s*([a-z]*)$/i.exec(value.trim());
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  const bytes = m && unit ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(bytes)) {
    throw new InvalidArgumentError(`"${value}" is not a byte count (e.g. 1048576, 512KiB, 2MiB)`);
  }
  return bytes;
}

/** An integer in [min, max], named `what` in the error. */
export function integerIn(min: number, max: number, what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`"${value}" is not ${what} (${min}-${max})`);
    }
    return n;
  };
}

/** A TCP port (1-65535). */
export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new InvalidArgumentError(`"${value}" is not a TCP port (1-65535)`);
  }
  return port;
}

/** A listening port, or 0 to let the system pick a free one. */
export function listenPort(value: string): number {
  return value.trim() === '0' ? 0 : parsePort(value);
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`"${value}" is not a positive integer`);
  return n;
}

/** A number in [0, 1]. */
export function share(text: string): number {
  const x = Number(text);
  if (!(x >= 0 && x <= 1))
    throw new InvalidArgumentError(`"${text}" is not a share between 0 and 1`);
  return x;
}

export function positiveNumber(text: string): number {
  const x = Number(text);
  if (!(x > 0)) throw new InvalidArgumentError(`"${text}" is not a positive number`);
  return x;
}

/** A comma-separated list, blanks dropped. */
export function list(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/**
 * A comma-separated list whose items are all among `all`; `what` (the flag) names it in the
 * error, with the items not allowed and the choices.
 */
export function listOf(all: readonly string[], what: string) {
  return (value: string): string[] => {
    const items = list(value);
    const wrong = items.filter((item) => !all.includes(item));
    if (wrong.length || items.length === 0) {
      throw new InvalidArgumentError(
        `${what}: ${wrong.join(', ') || 'none'}; choose from ${all.join(', ')}`,
      );
    }
    return items;
  };
}

/** A repeatable flag's values, in order. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** `--valkey-client`, one of CLIENT_KINDS (DEFAULT_CLIENT unless the command says otherwise). */
export function valkeyClientOption(help = 'Valkey client', fallback: ClientKind = DEFAULT_CLIENT) {
  return new Option('--valkey-client <name>', help).choices(CLIENT_KINDS).default(fallback);
}

/** `--relay-impl`, one of RELAY_IMPLS (no default unless given). */
export function relayImplOption(help: string, fallback?: RelayImpl) {
  const option = new Option('--relay-impl <name>', help).choices(RELAY_IMPLS);
  return fallback === undefined ? option : option.default(fallback);
}

/** `--valkey-mode`, one of TOPOLOGIES (standalone by default). */
export function valkeyModeOption(help = 'Valkey topology') {
  return new Option('--valkey-mode <mode>', help).choices(TOPOLOGIES).default('standalone');
}
