import { expect } from 'chai';
import { rebuildProjections, type RebuiltProjections } from '../../projections/rebuild';
import type { EventRow } from '../../domain/eventRows';
import type { StartBarrierAuthority } from '../../application/authority';
import { setUp } from './startBarrierConformance';

// The inline projections are exactly a function of the event log: rebuild every one of them
// from the stored events and demand the stored rows, on every backend (R5.3's premise).

export type StoredTable =
  | 'events'
  | 'runs'
  | 'step_runs'
  | 'security_audit_events'
  | 'trace_anchors'
  | 'audit_receipts'
  | 'step_run_mutations'
  | 'tool_execution_start_barriers'
  | 'start_replay_identities';

export interface RebuildBackend {
  readonly name: string;
  open(): Promise<StartBarrierAuthority>;
  /** Every stored row of one table, as the backend holds it. */
  rows(authority: StartBarrierAuthority, table: StoredTable): Promise<Record<string, unknown>[]>;
  /** Whether the identities have a replay-index table of their own (absent: yes); on PostgreSQL each is its fact's own key. */
  readonly replayIndexTable?: boolean;
}

/** The stored row in the rebuilt row's types (pg hands BIGINT back as decimal text). */
const likeRebuilt = (stored: Record<string, unknown>, rebuilt: object): Record<string, unknown> =>
  Object.fromEntries(
    Object.entries(stored).map(([k, v]) => [k, typeof (rebuilt as Record<string, unknown>)[k] === 'number' && typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v]),
  );

const withoutCommandDigest = ({ command_digest: _, ...r }: Record<string, unknown>): Record<string, unknown> => r;

const sortedBy = <T>(rows: readonly T[], key: (r: T) => string): T[] => [...rows].sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));

export const rebuildSuite = (backend: RebuildBackend): void => {
  describe(`rebuild from the event log: ${backend.name}`, function () {
    this.timeout(60_000);

    it('R5.3 rebuilding every projection from the event log gives the stored rows', async () => {
      const a = await backend.open();
      try {
        for (let i = 0; i < 3; i++) {
          const s = await setUp(a, { withApproval: i === 1 });
          await a.barriers.prepare(s.startCommand());
          if (i === 2) {
            await a.runs.handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'ops', reason: 'no_trace_of_tool', requestedAtMs: 5 } });
            await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 6 } });
            await a.barriers.prepare(s.startCommand((await a.runs.getStepRun(s.runId, s.stepRunId))!));
          }
        }
        const events = sortedBy((await backend.rows(a, 'events')) as unknown as (EventRow & { global_position?: unknown })[], (e) =>
          String(Number(e.global_position ?? 0)).padStart(20, '0'),
        );
        const rebuilt = rebuildProjections(events);
        const tables: readonly [StoredTable, keyof RebuiltProjections, (r: Record<string, unknown>) => string][] = [
          ['runs', 'runs', (r) => String(r.run_id)],
          ['step_runs', 'stepRuns', (r) => `${String(r.run_id)}\u0000${String(r.step_run_id)}`],
          ['security_audit_events', 'audit', (r) => String(r.audit_event_id)],
          ['trace_anchors', 'trace', (r) => String(r.trace_id)],
          ['audit_receipts', 'receipts', (r) => String(r.audit_receipt_id)],
          ['step_run_mutations', 'mutations', (r) => String(r.mutation_id)],
          ['tool_execution_start_barriers', 'barriers', (r) => String(r.start_id)],
          ...((backend.replayIndexTable ?? true)
            ? [['start_replay_identities', 'identities', (r: Record<string, unknown>) => `${String(r.identity)}\u0000${String(r.value)}`] as [StoredTable, keyof RebuiltProjections, (r: Record<string, unknown>) => string]]
            : []),
        ];
        for (const [table, projection, key] of tables) {
          // The replay index holds no command digest (0081): it is the barrier's, compared above.
          const rows = (rebuilt[projection] as unknown as Record<string, unknown>[]).map((r) => (table === 'start_replay_identities' ? withoutCommandDigest(r) : r));
          const want = sortedBy(rows, key);
          const stored = sortedBy(await backend.rows(a, table), key);
          expect(stored.length, table).to.equal(want.length);
          expect(stored.map((r, i) => likeRebuilt(r, want[i]!)), table).to.deep.equal(want);
        }
        expect(rebuilt.barriers).to.have.length(4);
      } finally {
        await a.close();
      }
    });
  });
};
