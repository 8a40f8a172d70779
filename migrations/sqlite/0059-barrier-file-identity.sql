-- R10.3: the file says it is a start barrier database ('QBAR'), so read commands can refuse any
-- other SQLite file from its header alone. user_version is kept by the migration runner.
PRAGMA application_id = 1363296594;
