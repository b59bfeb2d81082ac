import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Disturbance, StepArmResult, StepBenchOptions } from '../bench/step/step-bench.js';
import { LAW_NAMES } from '../pressure/laws/registry.js';
import type { LawName } from '../pressure/laws/registry.js';
import { parseNodeAddress } from '../store/options.js';
import type { ClientKind } from '../store/options.js';
import {
  listOf,
  parseBytes,
  positiveInt,
  positiveNumber,
  share,
  valkeyClientOption,
} from './flags.js';

const DISTURBANCE_NAMES: readonly Disturbance[] = ['step', 'spike', 'degrade'];

interface StepFlags {
  laws: string[];
  disturbances: string[];
  drain: number;
  eventBytes: number;
  headroom: number;
  level: number;
  overload: number;
  steadyShare: number;
  spikeShare: number;
  spikeHoldSec: number;
  degradeFactor: number;
  preSec: number;
  watchSec: number;
  tickMs: number;
  valkey?: string;
  valkeyClient: ClientKind;
  out?: string;
  from?: string;
}

/** `sluice bench step`: each law's step response to a flood, a spike and a degraded drain. */
export function registerStepBench(bench: Command): void {
  bench
    .command('step')
    .description(
      'step response per control law on a real closed loop (reference relay, its feed, two ' +
        'gateways, one writer): a flood at 3 x sustainable, a spike, a drain cut; settling ' +
        'time, overshoot, steady-state error, time to 90% accepted (writes step-bench.json ' +
        'and step-bench.md)',
    )
    .option(
      '--laws <list>',
      `control laws (${LAW_NAMES.join(', ')})`,
      listOf(LAW_NAMES, '--laws'),
      [...LAW_NAMES],
    )
    .option(
      '--disturbances <list>',
      'step, spike, degrade',
      listOf(DISTURBANCE_NAMES, '--disturbances'),
      [...DISTURBANCE_NAMES],
    )
    .option('--drain <bytes>', "the relay's drain rate per second", parseBytes, 2 * 1024 * 1024)
    .option('--event-bytes <bytes>', "content of the writer's events", parseBytes, 32 * 1024)
    .option(
      '--headroom <bytes>',
      "target = the idle relay's memory + this",
      parseBytes,
      64 * 1024 * 1024,
    )
    .option('--level <u>', 'memory / target held before the disturbance (0: none)', share, 0.6)
    .option('--overload <x>', 'step: the flood as a multiple of sustainable', positiveNumber, 3)
    .option(
      '--steady-share <x>',
      'spike, degrade: the offer as a share of sustainable',
      positiveNumber,
      0.9,
    )
    .option('--spike-share <x>', 'spike: this share of what is left below target', share, 0.6)
    .option('--spike-hold-sec <s>', 'spike: seconds the allocation is held', positiveNumber, 10)
    .option('--degrade-factor <x>', 'degrade: the drain after the cut, as a share', share, 0.25)
    .option('--pre-sec <s>', 'seconds of the writer before the disturbance', positiveNumber, 10)
    .option('--watch-sec <s>', 'seconds watched after its onset', positiveNumber, 40)
    .option('--tick-ms <n>', "the feed's tick", positiveInt, 500)
    .option('--valkey <host:port>', 'a standalone Valkey to use (default: start one)')
    .addOption(valkeyClientOption('Valkey client of the feed and gateways', 'ioredis'))
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .option(
      '--from <step-bench.json>',
      "run nothing: compute the figures and the table again from that file's recorded series " +
        '(into --out, by default beside it)',
    )
    .action(async (flags: StepFlags) => {
      const { STEP_DEFAULTS, formatStepTable, refigure, runStepBench } =
        await import('../bench/step/step-bench.js');
      const { defaultResultsDir, writeResult } = await import('../bench/results.js');
      const writeTable = (outDir: string, command: string, table: string) => {
        const defs = Object.entries(STEP_DEFINITIONS)
          .map(([k, v]) => `- \`${k}\`: ${v}`)
          .join('\n');
        writeFileSync(
          path.join(outDir, 'step-bench.md'),
          `\`${command}\`\n\n${table}\n\n${defs}\n`,
        );
        console.log(table);
      };
      if (flags.from) {
        const { readFileSync } = await import('node:fs');
        const old = JSON.parse(readFileSync(flags.from, 'utf8')) as {
          command: string;
          options: StepBenchOptions;
          note?: string;
          results: StepArmResult[];
        };
        const results = old.results.map(refigure);
        const outDir = flags.out ?? path.dirname(flags.from);
        const file = writeResult(outDir, 'step-bench.json', 'step-bench', {
          command: old.command,
          refigured: `sluice ${process.argv.slice(2).join(' ')}`,
          options: old.options,
          definitions: STEP_DEFINITIONS,
          note: old.note,
          results,
        });
        writeTable(outDir, old.command, formatStepTable(results, old.options));
        console.log(`\nresults: ${file}`);
        return;
      }
      const opts = {
        ...STEP_DEFAULTS,
        laws: flags.laws as LawName[],
        disturbances: flags.disturbances as Disturbance[],
        drainBytesPerSec: flags.drain,
        eventContentBytes: flags.eventBytes,
        headroomBytes: flags.headroom,
        level: flags.level,
        overload: flags.overload,
        steadyShare: flags.steadyShare,
        spikeShare: flags.spikeShare,
        spikeHoldSec: flags.spikeHoldSec,
        degradeFactor: flags.degradeFactor,
        preSec: flags.preSec,
        watchSec: flags.watchSec,
        tickMs: flags.tickMs,
        valkeyClient: flags.valkeyClient,
        ...(flags.valkey ? { valkey: parseNodeAddress(flags.valkey) } : {}),
      };
      if (opts.watchSec < 15)
        throw new Error('--watch-sec must be at least 15 (10 s of steady window)');
      const results = await runStepBench(opts, (line) => console.error(line));
      const outDir = flags.out ?? defaultResultsDir();
      const command = `sluice ${process.argv.slice(2).join(' ')}`;
      const file = writeResult(outDir, 'step-bench.json', 'step-bench', {
        command,
        options: opts,
        definitions: STEP_DEFINITIONS,
        note: 'relay, feed, two gateways, Valkey and the writer share this machine',
        results,
      });
      writeTable(outDir, command, formatStepTable(results, opts));
      console.log(`\nresults: ${file}`);
    });
}

/** What each figure means, written into the result file beside them. */
const STEP_DEFINITIONS = {
  u: 'relay memory (RssAnon) / target',
  peakOverTarget: 'the highest u from the onset to the end of the window',
  steadyU: "median of u over the window's last 10 s (steadyM: of m)",
  settleSec:
    'seconds from the onset until u enters steadyU ± 0.05 (5% of target) and stays inside to the end; null (with why) unless that stretch covers the last 10 s',
  steadyStateError: 'steadyU - 1, once settled',
  recover90Sec:
    'seconds from recoverFrom (the onset; for a spike its release) until the accepted rate, averaged over the trailing 5 s (none of them before recoverFrom), is at or above 0.9 x min(offered, sustainable after the disturbance; for a spike also what was accepted over the 5 s before it) and stays there to the end, at least 5 s; 0 if it never fell below',
};
