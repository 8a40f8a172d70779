import { CorruptRecordError, canonicalJson, streamNameOf, type StartBarrierRecord } from '../../domain';
import type { StartOutcomeRow } from '../../projections/outcomeRows';
import type { AuditEventRow, AuditReceiptRow, BarrierRow, MutationRow, ReplayIdentityRow, RunRow, StepRunRow, TraceAnchorRow } from '../../projections/rows';
import type { EventRow } from '../../domain/eventRows';
import { requireFollowsStepRunLog, type StreamHeads } from '../../application/checks/readChecks';
import { STEP_RUN_EVENT_TYPES } from '../../domain/stepRunMoves';
import type { EvidenceMacRow } from '../../application/evidenceKeys';
import type { EventMacRow, SealOriginRow } from '../../application/eventSeals';
import type { CompactedIdentityRow, CompactionRow } from '../../application/retentionRules';

// The in-memory tables: the same rows as the SQL tables, keyed as their unique indexes are.

export interface Tables {
  streams: Map<string, number>;
  events: EventRow[];
  eventIds: Set<string>;
  runs: Map<string, RunRow>;
  stepRuns: Map<string, StepRunRow>;
  audit: Map<string, AuditEventRow>;
  trace: Map<string, TraceAnchorRow>;
  receipts: Map<string, AuditReceiptRow>;
  mutations: Map<string, MutationRow>;
  barriers: Map<string, BarrierRow>;
  /** As in the SQL stores: the command digest is the barrier's. */
  identities: Map<string, Omit<ReplayIdentityRow, 'command_digest'>>;
  /** Recovery read model: outcome rows by start id. */
  outcomes: Map<string, StartOutcomeRow>;
  /** Keyed evidence (R9.4): the MAC row of each sealed barrier, by start id. */
  macs: Map<string, EvidenceMacRow>;
  /** Keyed evidence over the Run stream: seals by stream and first position, origins by key id. */
  eventMacs: Map<string, EventMacRow>;
  sealOrigins: Map<string, SealOriginRow>;
  /** R14.2: the compaction record of each compacted Run, by run id. */
  compactions: Map<string, CompactionRow>;
  /** R14.2: the identities of compacted starts, keyed as the replay index: they still refuse reuse. */
  compactedIdentities: Map<string, CompactedIdentityRow>;
}


export const emptyTables = (): Tables => ({
  streams: new Map(),
  events: [],
  eventIds: new Set(),
  runs: new Map(),
  stepRuns: new Map(),
  audit: new Map(),
  trace: new Map(),
  receipts: new Map(),
  mutations: new Map(),
  barriers: new Map(),
  identities: new Map(),
  outcomes: new Map(),
  macs: new Map(),
  eventMacs: new Map(),
  sealOrigins: new Map(),
  compactions: new Map(),
  compactedIdentities: new Map(),
});

export const copyTables = (t: Tables): Tables => ({
  streams: new Map(t.streams),
  events: [...t.events],
  eventIds: new Set(t.eventIds),
  runs: new Map(t.runs),
  stepRuns: new Map(t.stepRuns),
  audit: new Map(t.audit),
  trace: new Map(t.trace),
  receipts: new Map(t.receipts),
  mutations: new Map(t.mutations),
  barriers: new Map(t.barriers),
  identities: new Map(t.identities),
  outcomes: new Map(t.outcomes),
  macs: new Map(t.macs),
  eventMacs: new Map(t.eventMacs),
  sealOrigins: new Map(t.sealOrigins),
  compactions: new Map(t.compactions),
  compactedIdentities: new Map(t.compactedIdentities),
});


/** The event rows of one type in one stream, in stream order (the log read for a check, as the SQL backends' statement). */
export const streamEventsOfType = (t: Tables, stream: string, type: string): EventRow[] =>
  t.events.filter((e) => e.stream_id === stream && e.event_type === type).sort((a, b) => a.stream_position - b.stream_position);

const dataOf = (e: EventRow): Record<string, unknown> => JSON.parse(e.data_json) as Record<string, unknown>;

/** One StepRun's events in its Run's log, in StepRun version order (the SQL backends' StepRun version index). */
const stepRunEventRows = (t: Tables, stream: string, stepRunId: string): EventRow[] =>
  t.events
    .filter((e) => e.stream_id === stream && STEP_RUN_EVENT_TYPES.includes(e.event_type) && dataOf(e).stepRunId === stepRunId)
    .sort((a, b) => Number(dataOf(a).stepRunVersion) - Number(dataOf(b).stepRunVersion));

/** A StepRun's last event in its Run's log: its highest StepRun version. */
export const lastStepRunEventRow = (t: Tables, stream: string, stepRunId: string): EventRow | undefined => stepRunEventRows(t, stream, stepRunId).at(-1);

/** The Run's first event and one StepRun's events in version order (the SQL stores' SELECT_STEP_RUN_LOG). */
export const stepRunLogRows = (t: Tables, stream: string, stepRunId: string): [runCreated: EventRow | undefined, log: EventRow[]] => [
  t.events.find((e) => e.stream_id === stream && e.stream_position === 1),
  stepRunEventRows(t, stream, stepRunId),
];

/** What the SQL stores' event triggers check against the log, for a StepRun event about to be appended. */
export const requireFollowsLogIn = (t: Tables, stream: string, type: string, data: unknown): void => {
  if (type === 'ToolExecutionStartBarrierCommitted') return requireStartFollowsLog(t, stream, (data as { barrier: StartBarrierRecord }).barrier);
  const d = data as { stepRunId?: unknown; stepRunVersion?: unknown; startId?: unknown };
  if (typeof d.stepRunId !== 'string' || typeof d.stepRunVersion !== 'number' || !type.startsWith('StepRun')) return;
  requireFollowsStepRunLog(lastStepRunEventRow(t, stream, d.stepRunId), {
    type,
    stepRunId: d.stepRunId,
    stepRunVersion: d.stepRunVersion,
    startId: typeof d.startId === 'string' ? d.startId : undefined,
  });
};

/**
 * What the SQL stores' start trigger checks: a start authorises what the log made,
 * its Run's RunCreated (Project, snapshot), its StepRun's StepRunCreated (kind, tool definition)
 * and the move it started from (its approval), not what a head row says.
 */
const requireStartFollowsLog = (t: Tables, stream: string, b: StartBarrierRecord): void => {
  const [run, log] = stepRunLogRows(t, stream, b.stepRunId);
  const stepRunEvent = (version: number) => log.find((e) => dataOf(e).stepRunVersion === version);
  const same = (x: unknown, y: unknown) => canonicalJson(x ?? null) === canonicalJson(y ?? null);
  const made = stepRunEvent(1);
  const from = stepRunEvent(b.attempt.fromStepRunVersion);
  const r = run?.event_type === 'RunCreated' ? dataOf(run) : undefined;
  if (
    r === undefined || r.projectId !== b.projectId || r.snapshotId !== b.snapshotId || r.snapshotDigest !== b.snapshotDigest ||
    made?.event_type !== 'StepRunCreated' || dataOf(made).kind !== 'tool' || !same(dataOf(made).toolDefinition, b.toolDefinition) ||
    (from?.event_type !== 'StepRunReady' && from?.event_type !== 'StepRunAwaitingApproval') || !same(dataOf(from).approval, b.approval)
  ) {
    throw new CorruptRecordError('run history', stream, `illegal history refused: start ${b.startId} authorises what the Run's log made: its Project, snapshot, tool definition and approval (R9.1)`);
  }
};

/** The heads a read of `run-<runId>` checks its log against (agreedStreamVersion, R9.3). */
export const streamHeadsOf = (t: Tables, runId: string, stream = streamNameOf(runId)): StreamHeads => ({
  stream: t.streams.get(stream) ?? null,
  run: t.runs.get(runId)?.version ?? null,
  stepRunEvents: [...t.stepRuns.values()].reduce((n, r) => n + (r.run_id === runId ? r.version : 0), 0),
  starts: [...t.barriers.values()].filter((b) => b.run_id === runId).length,
  logEnd: t.events.reduce<number | null>((end, e) => (e.stream_id === stream && e.stream_position > (end ?? 0) ? e.stream_position : end), null),
});

/** A row under a unique key, refused as the SQL stores' unique indexes refuse it. */
export const insertUnique = <V>(map: Map<string, V>, key: string, value: V, what: string): void => {
  if (map.has(key)) throw new Error(`unique violation: ${what} ${key}`);
  map.set(key, value);
};
