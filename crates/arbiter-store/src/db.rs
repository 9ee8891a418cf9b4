//! The database seam: what the store's generic code needs of a database, said once. [`Db`]
//! names the values the store binds, the columns it reads and how a statement runs, so the
//! run index, the registry and the queues are ordinary generic code over SQLite and Postgres
//! alike ([`crate::store::SqlStore`]), and each store adds only what is its own: opening,
//! migrating, its locking dialect and its one-round-trip fast paths.
//!
//! [`Sql`] is a statement being built ([`sql`] starts one), [`Rec`] a row read back; both
//! check at compile time that the database can bind or decode each value, through the
//! bounds [`Db`] carries, so generic code never repeats them.

use std::future::Future;

use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, Pool, Type};

use crate::{DatabaseError, StoreError};

/// A failure sqlx reported, as the store's ports report it.
pub(crate) fn database_error(e: sqlx::Error) -> DatabaseError {
    let unique = matches!(&e, sqlx::Error::Database(db) if db.is_unique_violation());
    DatabaseError::new(e, unique)
}

/// sqlx's results as the store's: `.or_store()?` where sqlx is called directly.
pub(crate) trait OrStore<T> {
    fn or_store(self) -> Result<T, StoreError>;
}

impl<T> OrStore<T> for Result<T, sqlx::Error> {
    fn or_store(self) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Query(database_error(e)))
    }
}

/// A transaction on the database `D`.
pub type Tx<'c, D> = sqlx::Transaction<'c, D>;

/// The database can bind a `T` (borrowing for `'t`).
pub trait Encodes<'t, T>: Database {
    fn bind_to<'q>(query: Query<'q, Self, Self::Arguments>, value: T) -> Query<'q, Self, Self::Arguments>;
}

impl<'t, D: Database, T: Encode<'t, D> + Type<D>> Encodes<'t, T> for D {
    fn bind_to<'q>(query: Query<'q, Self, Self::Arguments>, value: T) -> Query<'q, Self, Self::Arguments> {
        query.bind(value)
    }
}

/// The database can read a `T` from a named column.
pub trait Decodes<T>: Database {
    fn decode(row: &Self::Row, column: &str) -> Result<T, sqlx::Error>;
}

impl<D: Database, T: for<'r> Decode<'r, D> + Type<D>> Decodes<T> for D
where
    for<'a> &'a str: ColumnIndex<D::Row>,
{
    fn decode(row: &Self::Row, column: &str) -> Result<T, sqlx::Error> {
        sqlx::Row::try_get(row, column)
    }
}

/// Where a statement runs: on a connection of the pool, or on one connection (a
/// transaction's).
pub enum On<'c, D: Database> {
    Pool(&'c Pool<D>),
    Conn(&'c mut D::Connection),
}

/// What a statement can run on: a pool or a transaction (which says the database).
pub trait Place<'c>: Send {
    type Db: Db;
    fn on(self) -> On<'c, Self::Db>;
}

impl<'c, D: Db> Place<'c> for &'c Pool<D> {
    type Db = D;
    fn on(self) -> On<'c, D> {
        On::Pool(self)
    }
}

impl<'c, D: Db> Place<'c> for &'c mut Tx<'_, D> {
    type Db = D;
    fn on(self) -> On<'c, D> {
        On::Conn(&mut **self)
    }
}

/// A database the store runs on: every value type the store binds or reads, and the running
/// of a statement. Implemented for every sqlx database that has them (SQLite and Postgres).
pub trait Db:
    Database
    + for<'a> Encodes<'a, &'a str>
    + for<'a> Encodes<'a, Option<&'a str>>
    + for<'a> Encodes<'a, &'a String>
    + for<'a> Encodes<'a, String>
    + for<'a> Encodes<'a, Option<String>>
    + for<'a> Encodes<'a, i64>
    + for<'a> Encodes<'a, Option<i64>>
    + for<'a> Encodes<'a, i32>
    + for<'a> Encodes<'a, Option<i32>>
    + for<'a> Encodes<'a, bool>
    + for<'a> Encodes<'a, Option<bool>>
    + Decodes<String>
    + Decodes<Option<String>>
    + Decodes<i64>
    + Decodes<Option<i64>>
    + Decodes<i32>
    + Decodes<Option<i32>>
    + Decodes<bool>
    + Decodes<Option<bool>>
{
    /// Runs `query`; the number of rows it changed.
    fn execute<'c>(
        query: Query<'c, Self, Self::Arguments>,
        on: On<'c, Self>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;
    fn fetch_all<'c>(
        query: Query<'c, Self, Self::Arguments>,
        on: On<'c, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'c;
    fn fetch_optional<'c>(
        query: Query<'c, Self, Self::Arguments>,
        on: On<'c, Self>,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send + 'c;
}

impl<D> Db for D
where
    D: Database
        + for<'a> Encodes<'a, &'a str>
        + for<'a> Encodes<'a, Option<&'a str>>
        + for<'a> Encodes<'a, &'a String>
        + for<'a> Encodes<'a, String>
        + for<'a> Encodes<'a, Option<String>>
        + for<'a> Encodes<'a, i64>
        + for<'a> Encodes<'a, Option<i64>>
        + for<'a> Encodes<'a, i32>
        + for<'a> Encodes<'a, Option<i32>>
        + for<'a> Encodes<'a, bool>
        + for<'a> Encodes<'a, Option<bool>>
        + Decodes<String>
        + Decodes<Option<String>>
        + Decodes<i64>
        + Decodes<Option<i64>>
        + Decodes<i32>
        + Decodes<Option<i32>>
        + Decodes<bool>
        + Decodes<Option<bool>>,
    D::QueryResult: RowsAffected,
    D::Arguments: sqlx::IntoArguments<D>,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
{
    async fn execute<'c>(query: Query<'c, Self, Self::Arguments>, on: On<'c, Self>) -> Result<u64, sqlx::Error> {
        let done = match on {
            On::Pool(pool) => query.execute(pool).await?,
            On::Conn(conn) => query.execute(conn).await?,
        };
        Ok(done.rows_affected())
    }

    async fn fetch_all<'c>(
        query: Query<'c, Self, Self::Arguments>,
        on: On<'c, Self>,
    ) -> Result<Vec<Self::Row>, sqlx::Error> {
        match on {
            On::Pool(pool) => query.fetch_all(pool).await,
            On::Conn(conn) => query.fetch_all(conn).await,
        }
    }

    async fn fetch_optional<'c>(
        query: Query<'c, Self, Self::Arguments>,
        on: On<'c, Self>,
    ) -> Result<Option<Self::Row>, sqlx::Error> {
        match on {
            On::Pool(pool) => query.fetch_optional(pool).await,
            On::Conn(conn) => query.fetch_optional(conn).await,
        }
    }
}

/// What a statement that changes rows reports.
pub trait RowsAffected {
    fn rows_affected(&self) -> u64;
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

/// Starts a statement on the database `D` (inferred from where it runs).
pub fn sql<'q, D: Db>(text: impl sqlx::SqlSafeStr) -> Sql<'q, D> {
    Sql(sqlx::query(text))
}

/// `head VALUES (…), (…)`: an insert of `rows` rows of `columns` values each, to bind row
/// after row, in the database's own placeholders (`?` on SQLite, whose `$N` are named
/// parameters looked up one by one; `$1`, `$2`… on Postgres).
pub fn values<D: Db>(head: &str, columns: usize, rows: usize) -> Sql<'static, D> {
    use sqlx::Arguments as _;
    let mut probe = String::new();
    let _ = D::Arguments::default().format_placeholder(&mut probe);
    let numbered = probe != "?";
    let mut text = String::with_capacity(head.len() + rows * columns * 6);
    text.push_str(head);
    text.push_str(" VALUES ");
    for row in 0..rows {
        text.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            if column > 0 {
                text.push_str(", ");
            }
            if numbered {
                text.push_str(&format!("${}", row * columns + column + 1));
            } else {
                text.push('?');
            }
        }
        text.push(')');
    }
    sql(sqlx::AssertSqlSafe(text))
}

/// A statement being built: [`bind`](Sql::bind) takes any value [`Db`] names.
pub struct Sql<'q, D: Db>(Query<'q, D, D::Arguments>);

/// What a statement that changed rows reports.
pub struct Done(u64);

impl Done {
    pub fn rows_affected(&self) -> u64 {
        self.0
    }
}

impl<'q, D: Db> Sql<'q, D> {
    /// The statement as sqlx has it, for a backend's own types.
    pub fn into_query(self) -> Query<'q, D, D::Arguments> {
        self.0
    }

    pub fn bind<'t, T>(self, value: T) -> Self
    where
        D: Encodes<'t, T>,
    {
        Sql(D::bind_to(self.0, value))
    }

    pub async fn execute<'c>(self, on: impl Place<'c, Db = D>) -> Result<Done, StoreError>
    where
        'q: 'c,
    {
        Ok(Done(D::execute(self.0, on.on()).await.or_store()?))
    }

    pub async fn fetch_all<'c>(self, on: impl Place<'c, Db = D>) -> Result<Vec<Rec<D>>, StoreError>
    where
        'q: 'c,
    {
        Ok(D::fetch_all(self.0, on.on()).await.or_store()?.into_iter().map(Rec).collect())
    }

    pub async fn fetch_optional<'c>(self, on: impl Place<'c, Db = D>) -> Result<Option<Rec<D>>, StoreError>
    where
        'q: 'c,
    {
        Ok(D::fetch_optional(self.0, on.on()).await.or_store()?.map(Rec))
    }

    /// The one row the statement returns; none is an error.
    pub async fn fetch_one<'c>(self, on: impl Place<'c, Db = D>) -> Result<Rec<D>, StoreError>
    where
        'q: 'c,
    {
        D::fetch_optional(self.0, on.on()).await.or_store()?.ok_or(sqlx::Error::RowNotFound).or_store().map(Rec)
    }
}

/// A row read back: [`try_get`](Rec::try_get) reads any value [`Db`] names.
pub struct Rec<D: Database>(pub D::Row);

impl<D: Db> Rec<D> {
    pub fn try_get<T, I: AsRef<str>>(&self, column: I) -> Result<T, StoreError>
    where
        D: Decodes<T>,
    {
        D::decode(&self.0, column.as_ref()).or_store()
    }
}
