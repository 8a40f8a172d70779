// SQL owned by the SQLite recovery read models. Every value is a bound parameter.
import { REPLAY_IDENTITIES, type ReplayIdentity } from '../../domain';
import { IDENTITY_STORAGE, barrierIdentitiesSql, identityProbeSql, identityStartIdsSql, keyedIdentitiesSql } from './identities';

/**
 * A row in the Project's scope: its own project_id, or its Run's (R9.3: one changed mirror
 * column must not take a start or a StepRun out of its Project's answers).
 */
const inProject = (alias: string) => `(@project_id IS NULL OR ${alias}.project_id = @project_id OR ${alias}.run_id IN (SELECT run_id FROM runs WHERE project_id = @project_id))`;

/** Barriers with no outcome fact, oldest first; each filter is off when its parameter is NULL. */
export const IN_DOUBT = `SELECT b.start_id FROM tool_execution_start_barriers b
  WHERE NOT EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = b.start_id)
    AND ${inProject('b')}
    AND (@run_id IS NULL OR b.run_id = @run_id)
    AND (@cutoff_ms IS NULL OR b.committed_at_ms <= @cutoff_ms)
  ORDER BY b.committed_at_ms, b.start_id
  LIMIT coalesce(@limit, -1)`;

/**
 * A page of the in-doubt index, one statement per scope so that each reads its own index
 * in listing order and stops at the limit: Project and Run are equalities, the cutoff a bound
 * (the largest integer when off).
 */
const inDoubtPage = (where: string) => `SELECT start_id, project_id, run_id, committed_at_ms FROM in_doubt_starts
  WHERE ${where}committed_at_ms <= @cutoff_ms
  ORDER BY committed_at_ms, start_id
  LIMIT @limit`;
export const IN_DOUBT_PAGE = {
  store: inDoubtPage(''),
  project: inDoubtPage('project_id = @project_id AND '),
  run: inDoubtPage('run_id = @run_id AND '),
  projectRun: inDoubtPage('run_id = @run_id AND project_id = @project_id AND '),
} as const;

export const IN_DOUBT_INDEX_AFTER = 'SELECT start_id, project_id, run_id, committed_at_ms FROM in_doubt_starts WHERE start_id > ? ORDER BY start_id LIMIT ?';

/** Runs of the barriers in scope that have an outcome: their streams' seals are checked (R9.4). */
export const RESOLVED_RUN_IDS = `SELECT DISTINCT b.run_id FROM tool_execution_start_barriers b JOIN start_outcomes o ON o.start_id = b.start_id
  WHERE ${inProject('b')}
    AND (@run_id IS NULL OR b.run_id = @run_id)
    AND (@cutoff_ms IS NULL OR b.committed_at_ms <= @cutoff_ms)
  ORDER BY b.run_id`;

/** StepRuns whose attempt is open; recovery checks each against its barrier. */
export const RUNNING_STEP_RUNS = `SELECT * FROM step_runs sr WHERE sr.status = 'running'
    AND ${inProject('sr')}
    AND (@run_id IS NULL OR sr.run_id = @run_id)
  ORDER BY run_id, step_run_id
  LIMIT coalesce(@limit, -1)`;

export const ATTEMPT_START_IDS = `SELECT start_id FROM tool_execution_start_barriers
  WHERE run_id = ? AND step_run_id = ? ORDER BY started_step_run_version, start_id`;

/** Each R4.1 identity, looked up by the key that holds it. */
export const IDENTITY_START_IDS = Object.fromEntries(
  Object.entries(IDENTITY_STORAGE).map(([identity, storage]) => [identity, identityStartIdsSql(storage)]),
) as Record<ReplayIdentity, string>;

export const OUTCOME_ROWS = 'SELECT * FROM start_outcomes WHERE start_id = ?';
export const EVENT_BY_ID = `SELECT e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms, e.chain_digest,
    (SELECT p.chain_digest FROM events p WHERE p.stream_id = e.stream_id AND p.stream_position = e.stream_position - 1) AS previous_chain
  FROM events e WHERE e.event_id = ?`;

export const COUNTS = `SELECT (SELECT count(*) FROM tool_execution_start_barriers) AS barriers, (SELECT count(*) FROM start_outcomes) AS outcomes,
  (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM step_runs) AS step_runs, (SELECT count(*) FROM events) AS events`;
export const BARRIER_IDS_AFTER = 'SELECT start_id FROM tool_execution_start_barriers WHERE start_id > ? ORDER BY start_id LIMIT ?';
export const OUTCOME_ROWS_AFTER = 'SELECT * FROM start_outcomes WHERE start_id > ? ORDER BY start_id LIMIT ?';
export const RUN_ROWS_AFTER = `SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version
  FROM runs r LEFT JOIN streams s ON s.stream_id = 'run-' || r.run_id WHERE r.run_id > ? ORDER BY r.run_id LIMIT ?`;
export const STEP_RUN_ROWS_AFTER = 'SELECT * FROM step_runs WHERE (run_id, step_run_id) > (?, ?) ORDER BY run_id, step_run_id LIMIT ?';
/** The log in stream order (the (stream_id, stream_position) key's index): one stream's events together. */
export const EVENT_ROWS_BY_STREAM_AFTER = `SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest
  FROM events WHERE (stream_id, stream_position) > (?, ?) ORDER BY stream_id, stream_position LIMIT ?`;
export const RUN_ROW = `SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version
  FROM runs r LEFT JOIN streams s ON s.stream_id = 'run-' || r.run_id WHERE r.run_id = ?`;
export const STEP_RUN_ROWS_OF_RUN = 'SELECT * FROM step_runs WHERE run_id = ? ORDER BY step_run_id';

// --- integrity checks of `verify`: each returns only the bad rows ---

/** A value two barriers name under one identity (R4.1): each fact's key and start id refuse it, re-checked in case they were dropped. */
export const DUPLICATE_IDENTITIES = `SELECT identity, value, count(*) AS n, group_concat(start_id, ', ') AS starts
  FROM (${barrierIdentitiesSql()}) GROUP BY identity, value HAVING count(*) > 1`;
/**
 * Rows holding an identity of a start whose barrier does not hold that value: a fact naming a
 * start that names another fact. The other way (each barrier's facts carry its start) is every
 * barrier's verified read, which probes each of its values.
 */
export const STRAY_IDENTITIES = `SELECT i.identity, i.value, i.start_id FROM (${keyedIdentitiesSql()}) i
  JOIN tool_execution_start_barriers b ON b.start_id = i.start_id
  WHERE i.value IS NOT CASE i.identity ${Object.entries(IDENTITY_STORAGE)
    .map(([identity, s]) => `WHEN '${identity}' THEN ${'column' in s ? `b.${s.column}` : 'json_array(b.run_id, b.step_run_id, b.started_step_run_version)'}`)
    .join(' ')} END`;
/** One barrier per attempt (R4.1): the unique constraint, re-checked in case it was dropped. */
export const DUPLICATE_ATTEMPTS = `SELECT run_id, step_run_id, started_step_run_version, count(*) AS n, group_concat(start_id, ', ') AS starts
  FROM tool_execution_start_barriers GROUP BY run_id, step_run_id, started_step_run_version HAVING count(*) > 1`;

const evidence = (table: string, id: string) => `SELECT '${table}' AS table_name, e.${id} AS record_id, e.start_id AS start_id,
    EXISTS (SELECT 1 FROM step_run_mutations m WHERE m.start_id = e.start_id) AS has_move,
    EXISTS (SELECT 1 FROM tool_execution_start_barriers b WHERE b.start_id = e.start_id AND b.${id} = e.${id}) AS has_barrier
  FROM ${table} e`;
/** No audit event, trace anchor or receipt without the StepRun move of its start and a barrier that names it. */
export const EVIDENCE_WITHOUT_MOVE = `SELECT * FROM (${[
  evidence('security_audit_events', 'audit_event_id'),
  evidence('trace_anchors', 'trace_id'),
  evidence('audit_receipts', 'audit_receipt_id'),
].join(' UNION ALL ')}) WHERE has_move = 0 OR has_barrier = 0`;
/** A mutation's barrier is its start's, found by the barrier's key: mutation_id alone has no index. */
export const MUTATIONS_WITHOUT_BARRIER = `SELECT m.mutation_id, m.start_id FROM step_run_mutations m
  WHERE NOT EXISTS (SELECT 1 FROM tool_execution_start_barriers b WHERE b.start_id = m.start_id AND b.mutation_id = m.mutation_id)`;
/** The stream head (R3.5's compare-and-set value) must equal its number of events, and be a Run stream. */
export const STREAM_HEADS = `SELECT * FROM (SELECT s.stream_id, s.stream_type, s.version,
    (SELECT count(*) FROM events e WHERE e.stream_id = s.stream_id) AS n,
    (SELECT max(stream_position) FROM events e WHERE e.stream_id = s.stream_id) AS top
  FROM streams s) WHERE version <> n OR top IS NULL OR version <> top OR stream_type <> 'run'`;
/**
 * The log's own ordinal (R9.2): the store allocates global positions 1..N with no gap (an
 * AUTOINCREMENT key whose rolled-back inserts give their numbers back, and no event row is ever
 * deleted), so a moved position leaves a gap, a doubled one or a count that disagrees.
 */
/** R14.2: the compaction records and the identities kept for them, for verify. */
export const COMPACTION_RECORDS = 'SELECT run_id, record_json, compaction_digest FROM run_compactions ORDER BY run_id';
export const COMPACTED_IDENTITIES = 'SELECT identity, value, start_id, run_id, command_digest, barrier_digest FROM compacted_identities ORDER BY identity, value';
export const EVENTS_BETWEEN = 'SELECT count(*) AS n FROM events WHERE global_position BETWEEN ? AND ?';
/** Whether a live row holds an identity value (the value bound): a probe of the key that holds it. */
export const LIVE_IDENTITY = Object.fromEntries(REPLAY_IDENTITIES.map((identity) => [identity, identityProbeSql(identity)])) as Record<ReplayIdentity, string>;
export const RUN_HAS_ROWS = 'SELECT 1 FROM runs WHERE run_id = ? UNION ALL SELECT 1 FROM streams WHERE stream_id = ?';
export const GLOBAL_ORDER = 'SELECT count(*) AS n, min(global_position) AS lo, max(global_position) AS hi FROM events';
/** Within each stream the global order follows the stream positions. */
export const GLOBAL_ORDER_AGAINST_STREAMS = `SELECT stream_id, stream_position, global_position FROM (
    SELECT stream_id, stream_position, global_position, lag(global_position) OVER (PARTITION BY stream_id ORDER BY stream_position) AS previous FROM events)
  WHERE previous >= global_position LIMIT 20`;
/** Every driver claim row, for verify's reading of the claim history. */
// With the barrier's timeout (its event's admission), the bound of each claim's lease (R12.3).
export const CLAIM_ROWS = `SELECT c.start_id, c.generation, c.kind, c.driver_id, c.at_ms, c.lease_until_ms, c.claim_digest,
  (SELECT json_extract(e.data_json, '$.barrier.admission.timeoutMs') FROM events e WHERE e.event_id = 'barrier:' || c.start_id) AS barrier_timeout_ms
  FROM adapter_driver_claims c ORDER BY c.start_id, c.generation, c.kind`;
