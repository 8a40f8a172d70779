import { named } from './named';
import { STEP_RUN_EVENT_TYPES_SQL } from '../../domain/stepRunMoves';

// The PostgreSQL reads of a Run's state (its heads and one StepRun) and of what its log says of
// them (R3.2, R9.3). The start's own first read (sql.ts) is built from the same parts.

// ------------------------------------------------------------------ R3.2 lock and read

/**
 * The Run head, its stream head and the StepRun. Inside a write transaction the Run's turn is
 * already held (the Run head row lock, taken by BEGIN's round trip, transactionSql.ts), and
 * only the event trigger moves these rows, so a plain read is the locked state (R3.2, R5.2).
 * The scalar subqueries each return NULL when their row does not exist; `log_without_run`, read
 * only when the Run head is missing, says whether its stream has events or a start barrier
 * names the Run all the same (R9.3). A start's first read leaves it out (plan nodes cost on
 * every execution): a start refused for a missing Run asks afterwards (RUN_TRACES).
 */
export const RUN_STATE_CTES = `run AS (SELECT run_id, project_id, snapshot_id, snapshot_digest, version FROM ql3.runs WHERE run_id = :run_id),
  stream AS (SELECT version FROM ql3.streams WHERE stream_id = :stream_id),
  step AS (SELECT run_id, step_run_id, project_id, kind, status, version, digest, state_json
             FROM ql3.step_runs WHERE run_id = :run_id AND step_run_id = :step_run_id)`;
export const runStateColumns = (gate: string, logProbe = true) => `(SELECT row_to_json(run) FROM run${gate}) AS run,
       (SELECT version FROM stream${gate}) AS stream_version,
       (SELECT row_to_json(step) FROM step${gate}) AS step_run${
         logProbe ? `,
       (SELECT EXISTS (SELECT 1 FROM ql3.events e WHERE e.stream_id = :stream_id)
            OR EXISTS (SELECT 1 FROM ql3.tool_execution_start_barriers b WHERE b.run_id = :run_id) WHERE NOT EXISTS (SELECT 1 FROM run)) AS log_without_run` : ''
       }`;

/** What says a Run exists when its head row does not: its stream head, its log, a StepRun, a start barrier (R9.3). */
export const RUN_TRACES = named(`SELECT EXISTS (SELECT 1 FROM ql3.streams WHERE stream_id = :stream_id)
    OR EXISTS (SELECT 1 FROM ql3.events WHERE stream_id = :stream_id)
    OR EXISTS (SELECT 1 FROM ql3.step_runs WHERE run_id = :run_id)
    OR EXISTS (SELECT 1 FROM ql3.tool_execution_start_barriers WHERE run_id = :run_id) AS traced`);

const eventColumns = (from: string) => `SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM ${from}`;

/** The StepRun's last event in the Run's log, as one json row: one descent of the StepRun version index. */
export const lastStepRunEventColumn = (gate: string) => `(SELECT row_to_json(e) FROM (
          ${eventColumns('ql3.events')}
           WHERE stream_id = :stream_id
             AND event_type IN ${STEP_RUN_EVENT_TYPES_SQL}
             AND (data_json::json ->> 'stepRunId') = :step_run_id${gate}
           ORDER BY ((data_json::json ->> 'stepRunVersion')::bigint) DESC LIMIT 1) e) AS last_step_run_event`;

/** The Run, its stream head and one StepRun; the StepRun's last log event only when it has no head row (R9.3: absent only if the log holds none of it). */
export const READ_RUN_STATE = named(`WITH
  ${RUN_STATE_CTES}
SELECT ${runStateColumns('')},
       ${lastStepRunEventColumn(' AND NOT EXISTS (SELECT 1 FROM step)')}`);

/**
 * READ_RUN_STATE and the StepRun's last event in the Run's log, in one statement: one snapshot,
 * so a writer that commits between two reads can never make a sound head look behind its log.
 */
export const READ_STEP_RUN_AND_LOG_END = named(`WITH
  ${RUN_STATE_CTES}
SELECT ${runStateColumns('')},
       ${lastStepRunEventColumn('')}`);

/** The Run's first event and the StepRun's events in version order: what its head must fold to (R9.3). */
const stepRunLogColumns = `(SELECT row_to_json(e) FROM (${eventColumns('ql3.events')} WHERE stream_id = :stream_id AND stream_position = 1) e) AS run_created,
       (SELECT json_agg(row_to_json(e) ORDER BY (e.data_json::json ->> 'stepRunVersion')::bigint) FROM (${eventColumns('ql3.events')}
           WHERE stream_id = :stream_id AND event_type IN ${STEP_RUN_EVENT_TYPES_SQL}
             AND (data_json::json ->> 'stepRunId') = :step_run_id) e) AS step_run_log`;

/** getStepRun's read: READ_RUN_STATE's columns and the StepRun's log (its last event is the log's), one statement, one snapshot. */
export const READ_STEP_RUN_WITH_LOG = named(`WITH
  ${RUN_STATE_CTES}
SELECT ${runStateColumns('')},
       ${stepRunLogColumns}`);

/** The StepRun's log alone: an outcome's check, inside a write that already holds the heads. */
export const READ_STEP_RUN_LOG = named(`SELECT ${stepRunLogColumns}`);
