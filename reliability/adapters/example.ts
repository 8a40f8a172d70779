// One tool call through barrier, adapter and outcome, with each real adapter (README,
// "Adapters and post-start recovery"). Run: `npx tsx reliability/adapters/example.ts`.
// Everything is local: a SQLite file in a temporary directory, a shell command, an HTTP tool
// and an MCP tool on 127.0.0.1, and an MCP stdio server spawned here.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpAdapter, mcpAdapter, processAdapter, type ToolAdapter } from '../../infrastructure/adapters';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { ADAPTER_REFS, readyToolCall } from '../../testkit/adapters/toolCall';
import { EffectsFile, MCP_ACT_TOOL, MCP_STATUS_TOOL, mcpStdioCommand, processToolCommand, startHttpTool, startMcpHttpTool } from '../../testkit/adapters/tools';

const main = async (): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), 'qlb-example-'));
  // R12.2: the tool input is sealed under a plan key (32 bytes from your secret store; never in the database).
  const authority = await openSqliteStartBarrier({ path: join(dir, 'barrier.db'), plans: { keyring: { current: 'k1', keys: { k1: randomBytes(32) } } } });
  // R11.3, R12.4: nothing is invoked unless execution is opened explicitly, on a keyed plan store.
  const execution = openExecution(authority, { execution: 'enabled' });
  const httpTool = await startHttpTool(dir);
  const mcpTool = await startMcpHttpTool(dir);
  const processEffects = new EffectsFile(join(dir, 'process.effects'));
  const stdioEffects = new EffectsFile(join(dir, 'stdio.effects'));

  const adapters: [string, 'process' | 'http' | 'mcp', ToolAdapter, EffectsFile][] = [
    ['process', 'process', processAdapter({ ref: ADAPTER_REFS.process, ...processToolCommand, journalDir: join(dir, 'journal'), env: { TOOL_EFFECTS: processEffects.path, TOOL_MODE: 'ok' } }), processEffects],
    ['http', 'http', httpAdapter({ ref: ADAPTER_REFS.http, url: httpTool.url, statusUrl: httpTool.statusUrl }), httpTool.effects],
    ['mcp (streamable HTTP)', 'mcp', mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: { kind: 'http', url: mcpTool.url }, tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true }), mcpTool.effects],
    ['mcp (stdio)', 'mcp', mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: mcpStdioCommand(stdioEffects.path, 'ok'), tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true }), stdioEffects],
  ];
  try {
    for (const [label, kind, adapter, effects] of adapters) {
      // Orchestration made a Tool StepRun ready and admitted this input (planDigest binds it).
      const call = await readyToolCall(authority, kind, { query: 'orders of today', limit: 10 }, 15_000);
      // The redaction contract: operators see `query`, never `limit` or anything else.
      const saga = createToolStepSaga({ execution, adapter, sagaId: 'example-saga', redaction: { fields: ['query'] } });
      const result = await saga.drive(call.trigger, call.plan, call.invocation);
      const startId = result.barrier.record.startId;
      const outcome = await authority.recovery.outcome(startId);
      console.log(
        `${label.padEnd(22)} ${result.prepared} -> ${result.status}; tool side effects ${effects.count(startId)}; ` +
          `outcome fact: ${outcome?.outcome} ${outcome?.reason} ${outcome?.outcomeDigest?.slice(0, 19)}...`,
      );
      const plan = await authority.plans.status(startId);
      console.log(`${''.padEnd(22)} plan ${plan.status}; preview ${plan.status === 'absent' ? '-' : JSON.stringify(plan.preview.shown)}`);
      // A replayed trigger is an exact replay: the recorded outcome stops a second invocation.
      const replay = await saga.drive(call.trigger, call.plan, call.invocation);
      console.log(`${''.padEnd(22)} replay -> ${replay.status}; tool side effects still ${effects.count(startId)}`);
    }
  } finally {
    await httpTool.close();
    await mcpTool.close();
    await execution.close();
    await authority.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
