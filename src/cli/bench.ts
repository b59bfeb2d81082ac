import type { Command } from 'commander';
import { registerBenchRun, registerRelayInstall } from './bench-run.js';
import { registerBenchPair } from './bench-pair.js';
import { registerPeer } from './bench-peer.js';
import { registerWsFloor } from './bench-ws-floor.js';
import { registerBenchPlan } from './bench-plan.js';
import { registerBenchVerify } from './bench-verify.js';
import { registerClientsBench } from './bench-clients.js';
import { registerRangesBench } from './bench-ranges.js';
import { registerFleetBench } from './bench-fleet.js';
import { registerSpikeBench } from './bench-spike.js';
import { registerStepBench } from './bench-step.js';
import { registerScaleBench } from './bench-scale.js';
import { registerScaleFleetBench } from './bench-scale-fleet.js';
import { registerAdaptiveWorkBench } from './bench-adaptive-work.js';
import { registerOomBench, registerOomProbe } from './bench-oom.js';
import { InvalidArgumentError } from 'commander';
import { collect, positiveInt } from './flags.js';

export function registerBench(program: Command): void {
  const bench = program
    .command('bench')
    .description('benchmarks: bench run (what run-all.sh drives), and single-purpose measurements');
  registerBenchRun(bench);
  registerBenchPair(bench);
  registerBenchPlan(bench);
  registerRelayInstall(bench);
  registerPeer(bench);
  registerWsFloor(bench);
  registerBenchVerify(bench);
  registerClientsBench(bench);
  registerRangesBench(bench);
  registerFleetBench(bench);
  registerSpikeBench(bench);
  registerStepBench(bench);
  registerScaleBench(bench);
  registerScaleFleetBench(bench);
  registerAdaptiveWorkBench(bench);
  registerOomBench(bench);
  registerOomProbe(bench);
  bench
    .command('simulate')
    .description('the three variants on the simulated relay plant (deterministic, instant)')
    .option('--factor <x>', 'overload as a multiple of the drain', positiveInt, 3)
    .action(async (flags: { factor: number }) => {
      const { simulateVariants, formatSimulation } = await import('../bench/simulate.js');
      console.log(formatSimulation(simulateVariants(flags.factor)));
    });
  bench
    .command('session')
    .description(
      'record a benchmark session in a results directory: session.json (command, machine, ' +
        'versions, settings) and README.md (what run-all.sh calls first)',
    )
    .requiredOption('--out-dir <dir>', 'the results directory')
    .requiredOption('--command <line>', 'the command line the session was started with')
    .option('--set <key=value>', 'a setting every run shares (repeatable)', collect, [])
    .action(async (flags: { outDir: string; command: string; set: string[] }) => {
      const settings: Record<string, string> = {};
      for (const pair of flags.set) {
        const at = pair.indexOf('=');
        if (at < 1) throw new InvalidArgumentError(`--set "${pair}": expected key=value`);
        settings[pair.slice(0, at)] = pair.slice(at + 1);
      }
      const { writeSession } = await import('../bench/run/session.js');
      await writeSession(flags.outDir, flags.command, settings);
    });
  bench
    .command('schema')
    .description(`write the run file's JSON Schema to ${RUN_FILE_SCHEMA} (what the report checks)`)
    .option('--check', 'only check that the file is what the schema generates (exit 1 if not)')
    .action(async (flags: { check?: boolean }) => {
      const { readFileSync, writeFileSync } = await import('node:fs');
      const path = await import('node:path');
      const { PROJECT_ROOT } = await import('../harness/paths.js');
      const { runFileJsonSchema } = await import('../bench/run/result-schema.js');
      const file = path.join(PROJECT_ROOT, RUN_FILE_SCHEMA);
      const text = JSON.stringify(runFileJsonSchema(), null, 2) + '\n';
      if (!flags.check) {
        writeFileSync(file, text);
        console.log(file);
        return;
      }
      if (readFileSync(file, 'utf8') !== text) {
        console.error(`${RUN_FILE_SCHEMA} is out of date: run sluice bench schema`);
        process.exitCode = 1;
      }
    });
}

/** Where the run file's JSON Schema is checked in, from the project root. */
const RUN_FILE_SCHEMA = 'docs/run-file.schema.json';
