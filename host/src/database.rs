//! Engines' own databases (Prefect's SQLite), opened read-only with SQLite itself.
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, types::ValueRef};

use pipetrace_core::port::{Cell, Database, HostError};

pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
}

impl Sqlite {
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).ok()?;
        // The engine's server writes meanwhile (WAL): wait a little for its locks.
        let _ = conn.busy_timeout(std::time::Duration::from_millis(200));
        Some(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn error(&self, e: rusqlite::Error) -> HostError {
        HostError::Query {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }
}

fn cell(v: ValueRef<'_>) -> Cell {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(i) => Cell::Int(i),
        ValueRef::Real(r) => Cell::Real(r),
        ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
    }
}

impl Database for Sqlite {
    fn rows(&self, sql: &str, params: &[&str]) -> Result<Vec<Vec<Cell>>, HostError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.error(e))?;
        let width = stmt.column_count();
        let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
            (0..width).map(|i| Ok(cell(r.get_ref(i)?))).collect()
        });
        let rows = rows.map_err(|e| self.error(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.error(e))
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_core::attribution::engines::prefect::db::Db;

    use super::*;
    use crate::LiveHost;

    #[test]
    fn cells_keep_sqlite_types_and_bad_sql_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let db = Connection::open(&path).unwrap();
        db.execute_batch("CREATE TABLE t (a, b); INSERT INTO t VALUES (1, 'x'), (2.5, NULL);")
            .unwrap();
        let sqlite = Sqlite::open(&path).unwrap();
        let rows = sqlite
            .rows("SELECT a, b FROM t WHERE ?1 = 'all'", &["all"])
            .unwrap();
        let want = vec![
            vec![Cell::Int(1), Cell::Text("x".into())],
            vec![Cell::Real(2.5), Cell::Null],
        ];
        assert_eq!(rows, want);
        let err = sqlite
            .rows("SELECT nope FROM t", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.db") && err.contains("nope"), "{err}");
        // Read-only: it never writes the engine's records.
        assert!(sqlite.rows("DELETE FROM t", &[]).is_err());
        assert!(Sqlite::open(&dir.path().join("missing.db")).is_none());
    }

    #[test]
    fn prefect_task_runs_count_by_state_leaving_subflow_placeholders_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prefect.db");
        let db = Connection::open(&path).unwrap();
        db.execute_batch(
            "CREATE TABLE flow_run (id TEXT, parent_task_run_id TEXT);
             CREATE TABLE task_run (id TEXT, flow_run_id TEXT, state_type TEXT);
             INSERT INTO flow_run VALUES ('fr1', NULL), ('sub', 'tr6'), ('fr2', NULL);
             INSERT INTO task_run VALUES ('tr1', 'fr1', 'COMPLETED'), ('tr2', 'fr1', 'FAILED'),
               ('tr3', 'fr1', 'RUNNING'), ('tr4', 'fr1', 'PENDING'), ('tr5', 'fr1', 'PENDING'),
               ('tr6', 'fr1', 'RUNNING'), ('tr7', 'sub', 'SCHEDULED'), ('tr8', 'fr1', NULL),
               ('tr9', 'fr2', 'RUNNING');",
        )
        .unwrap();
        let db = Db::open(&LiveHost, &path).unwrap();
        let mut states: Vec<_> = ["fr1", "sub"]
            .iter()
            .flat_map(|f| db.task_states(f))
            .collect();
        states.sort();
        let s = |t: &str| Some(t.to_string());
        // tr6 is the subflow's placeholder: its own run's task runs count instead.
        let want = vec![
            (None, 1),
            (s("COMPLETED"), 1),
            (s("FAILED"), 1),
            (s("PENDING"), 2),
            (s("RUNNING"), 1),
            (s("SCHEDULED"), 1),
        ];
        assert_eq!(states, want);
        assert!(db.task_states("nope").is_empty());
    }
}
