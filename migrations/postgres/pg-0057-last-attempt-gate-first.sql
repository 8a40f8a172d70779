-- R9.5, R5.2: a last attempt takes the start gate before its snapshot (pg-0052 took it inside a
-- function, so after the first statement had fixed the SERIALIZABLE snapshot). Writers that
-- committed while it waited for the gate were then concurrent with it: its probes read index
-- pages they had written, theirs read pages it then wrote, and SSI failed it with 40001: the
-- one failure the last attempt exists to rule out, seen under load at 16 clients. LOCK TABLE
-- takes no snapshot, so an attempt that sends it before any query runs with a snapshot in
-- which every writer that held the gate before it has committed.
--
-- LOCK TABLE in ACCESS EXCLUSIVE mode needs UPDATE, DELETE or TRUNCATE on the table. The
-- runtime gets UPDATE on ql3.start_gate: a table with no columns and no rows, so no UPDATE can
-- name anything to change; the grant is the lock and nothing else. It widens nothing: the
-- runtime could already hold the gate exclusively through ql3.take_start_gate(true), as long
-- as its own transaction lasts. Other logins still have no privilege on it at all.
SET LOCAL ROLE ql3_owner;

GRANT UPDATE ON ql3.start_gate TO ql3_runtime;
