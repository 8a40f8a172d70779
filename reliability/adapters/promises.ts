import { join } from 'node:path';
import { ExecutionRefusedError, type ToolAdapter } from '../../domain';
import { httpAdapter, inspectionTicket, mcpAdapter, processAdapter } from '../../infrastructure/adapters';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { createToolStepSaga, type ExecutionAuthority } from '../../application/saga';
import type { BackendName } from '../../testkit/rawSql';
import { ADAPTER_REFS, readyToolCall } from '../../testkit/adapters/toolCall';
import { EffectsFile, MCP_ACT_TOOL, MCP_STATUS_TOOL, mcpStdioCommand } from '../../testkit/adapters/tools';
import { SETSID_TOOL_SCRIPT, envProbeCommand, leaksOf, markerLines, probedEnv, startRedirectingTool, withRuntimeSecrets } from '../../testkit/adapters/hostileTools';

// The adapters keep what they declare (R12.3), counted on the tool's side against tools that
// try otherwise: a tool whose descendants call setsid, run in a subshell or hold stdout, hung
// past its timeout (actions after the timeout); a tool that redirects every request to another
// origin (requests reaching that origin, attempts recorded as the tool's success); and an
// environment probe, as a process tool and as an MCP stdio server, run while the runtime holds
// a database password, a database URL, a key file's path and a cloud key (variables of the
// runtime's it saw). Every count must be 0.

export const ADAPTER_PROMISES = ['setsid_past_timeout', 'redirecting_http', 'environment_probe'] as const;
export type AdapterPromise = (typeof ADAPTER_PROMISES)[number];

export interface AdapterPromiseCounts {
  readonly backend: BackendName;
  readonly promise: AdapterPromise;
  readonly trials: number;
  /** Actions of the setsid tool's descendants after its timeout. */
  readonly actedAfterTimeout: number;
  /** Requests that reached the origin a tool redirected to. */
  readonly crossOriginRequests: number;
  /** Variables of the runtime's environment a probe saw. */
  readonly environmentLeaks: number;
  /** Attempts recorded as `tool_succeeded` although the tool only redirected. */
  readonly recordedSucceeded: number;
  /** Attempts the saga refused because the adapter declared no timeout it could enforce here. */
  readonly refused: number;
}

/** Longer than the setsid tool's descendants wait before acting (1 s). */
const AFTER_DESCENDANTS_MS = 2500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const runAdapterPromises = async (
  backend: BackendName,
  trials: number,
  authority: RecoverableStartBarrierAuthority,
  execution: ExecutionAuthority,
  dir: string,
): Promise<{ counts: AdapterPromiseCounts[]; failures: string[] }> => {
  const failures: string[] = [];
  const zero = { actedAfterTimeout: 0, crossOriginRequests: 0, environmentLeaks: 0, recordedSucceeded: 0, refused: 0 };
  const counts = Object.fromEntries(ADAPTER_PROMISES.map((p) => [p, { ...zero }])) as Record<AdapterPromise, typeof zero>;
  const drive = async (adapter: ToolAdapter, kind: keyof typeof ADAPTER_REFS, timeoutMs: number, input: unknown) => {
    const call = await readyToolCall(authority, kind, input, timeoutMs);
    return createToolStepSaga({ execution, adapter, sagaId: 'reliability-promises', leaseGraceMs: 0 }).drive(call.trigger, call.plan, call.invocation);
  };

  for (let trial = 0; trial < trials; trial++) {
    // A setsid tool past its timeout.
    const marker = join(dir, `setsid-${trial}.marker`);
    const setsid = processAdapter({ ref: ADAPTER_REFS.process, command: '/bin/sh', args: ['-c', SETSID_TOOL_SCRIPT], journalDir: join(dir, 'promises-journal'), env: { MARK: marker } });
    try {
      const r = await drive(setsid, 'process', 500, { promise: 'setsid', trial });
      if (r.status !== 'failed') failures.push(`${backend} setsid tool: ${r.status}, not a failed start (tool_timed_out)`);
    } catch (e) {
      if (e instanceof ExecutionRefusedError) counts.setsid_past_timeout.refused++;
      else throw e;
    }
    await sleep(AFTER_DESCENDANTS_MS);
    counts.setsid_past_timeout.actedAfterTimeout += markerLines(marker);

    // A redirecting HTTP tool (307 to another origin), its status endpoint redirecting too.
    const tool = await startRedirectingTool();
    try {
      const adapter = httpAdapter({ ref: ADAPTER_REFS.http, url: tool.url, statusUrl: tool.statusUrl, headers: { 'x-api-key': 'configured-header' } });
      const r = await drive(adapter, 'http', 5000, { promise: 'redirect', trial });
      const outcome = await authority.recovery.outcome(r.barrier.record.startId);
      if (outcome?.reason === 'tool_succeeded' || r.status === 'completed') counts.redirecting_http.recordedSucceeded++;
      if (r.status !== 'in_doubt') failures.push(`${backend} redirecting tool: ${r.status}, not in doubt`);
      await adapter.inspect!(await inspectionTicket(authority, r.barrier.record.startId), { claims: [] });
      counts.redirecting_http.crossOriginRequests += tool.crossOriginRequests();
    } finally {
      await tool.close();
    }

    // The environment probe, as a process tool and as an MCP stdio server.
    await withRuntimeSecrets(async () => {
      const out = join(dir, `probe-process-${trial}.json`);
      const given = { PROBE_OUT: out };
      const probe = processAdapter({ ref: ADAPTER_REFS.process, ...envProbeCommand, journalDir: join(dir, 'promises-journal'), env: given });
      const r = await drive(probe, 'process', 15_000, { promise: 'env', trial });
      if (r.status !== 'completed') failures.push(`${backend} environment probe (process): ${r.status}`);
      else counts.environment_probe.environmentLeaks += leaksOf(probedEnv(out), { ...given, QL_START_ID: r.barrier.record.startId }).length;

      const mcpOut = join(dir, `probe-mcp-${trial}.json`);
      const transport = mcpStdioCommand(new EffectsFile(join(dir, 'probe-mcp.effects')).path, 'ok', mcpOut);
      const server = mcpAdapter({ ref: ADAPTER_REFS.mcp, transport, tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true });
      const m = await drive(server, 'mcp', 20_000, { promise: 'env-mcp', trial });
      if (m.status !== 'completed') failures.push(`${backend} environment probe (MCP stdio): ${m.status}`);
      else counts.environment_probe.environmentLeaks += leaksOf(probedEnv(mcpOut), transport.env).length;
    });
  }

  const rows = ADAPTER_PROMISES.map((promise): AdapterPromiseCounts => ({ backend, promise, trials, ...counts[promise] }));
  for (const r of rows) {
    if (r.actedAfterTimeout + r.crossOriginRequests + r.environmentLeaks + r.recordedSucceeded > 0) {
      failures.push(`${backend} ${r.promise}: ${r.actedAfterTimeout} actions after the timeout, ${r.crossOriginRequests} cross-origin requests, ${r.environmentLeaks} environment leaks, ${r.recordedSucceeded} recorded as success`);
    }
  }
  return { counts: rows, failures };
};
