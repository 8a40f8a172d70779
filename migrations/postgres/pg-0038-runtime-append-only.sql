-- R9.1: the runtime role appends, it never rewrites. The stream, Run and StepRun heads are kept
-- by the event trigger (pg-0036), so ql3_runtime loses INSERT on them and UPDATE, DELETE and
-- TRUNCATE on every ql3 table. The ADR grant on the barrier table stays: SELECT, INSERT for
-- ql3_runtime and nothing for the other product roles (pg-0030).
SET LOCAL ROLE ql3_owner;

REVOKE UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ql3 FROM ql3_runtime;
REVOKE INSERT ON ql3.streams, ql3.runs, ql3.step_runs FROM ql3_runtime;
