import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  ProcessSampler,
  clockTicks,
  parseProcStat,
  withCpuPerRequest,
} from '../../src/bench/run/proc-sampler.js';

/** The sampler against real processes (the parsing and the figures: test/unit/bench/bench-measure.test.ts). */
describe('benchmark measurement', { timeout: 60_000 }, () => {
  it("samples a process's CPU time as the kernel counts it, however loaded the machine", async () => {
    // Each says when it is running (node takes a while to start on a busy machine) and
    // lasts well past the window; both are killed below. How much CPU the busy one gets
    // depends on the machine's load: the sampler must agree with the kernel's own count.
    const busy = spawn(process.execPath, [
      '-e',
      'console.log("running"); const t = Date.now(); while (Date.now() - t < 20000);',
    ]);
    const idle = spawn(process.execPath, [
      '-e',
      'console.log("running"); setTimeout(() => {}, 20000)',
    ]);
    const kernelMs = (pid: number) =>
      (parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')) * 1000) / clockTicks();
    try {
      await Promise.all([once(busy.stdout, 'data'), once(idle.stdout, 'data')]);
      const sampler = new ProcessSampler([
        { role: 'relay', name: 'busy', pid: busy.pid! },
        { role: 'relay', name: 'idle', pid: idle.pid! },
      ]);
      const before = kernelMs(busy.pid!);
      sampler.start();
      await new Promise((r) => setTimeout(r, 1500));
      const [b, i] = sampler.stop();
      const spent = kernelMs(busy.pid!) - before;
      assert.ok(b!.samples.length >= 4, `${b!.samples.length} samples`);
      assert.ok(spent > 0, 'the busy process ran');
      // Read within microseconds of the sampler's first and last readings: one tick apart.
      const tick = 1000 / clockTicks();
      assert.ok(
        b!.cpuMs! <= spent + tick && b!.cpuMs! >= spent - 2 * tick,
        `sampled ${b!.cpuMs} ms of CPU, the kernel counted ${spent} ms`,
      );
      assert.ok(b!.cpuPercent.mean! > i!.cpuPercent.mean!, 'busy above idle');
      assert.ok(i!.cpuPercent.mean! < 20, `idle at ${i!.cpuPercent.mean}%`);
      assert.ok(b!.rssBytes.max! > 10 * 1024 * 1024);
      assert.ok(i!.cpuMs! < 300, `idle for ${i!.cpuMs} ms`);
      const [perB] = withCpuPerRequest([b!], 1000);
      assert.equal(perB!.cpuMsPerRequest, Number((b!.cpuMs! / 1000).toFixed(4)));
      assert.equal(withCpuPerRequest([b!], 0)[0]!.cpuMsPerRequest, null);
    } finally {
      busy.kill();
      idle.kill();
    }
  });
});
