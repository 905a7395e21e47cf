//! Subscribers' checkpoints, moved by compare-and-set so two dispatchers never both advance one.

use bounda::store::StoreError;

use crate::PostgresStore;
use crate::sql::{bigint, failed};

impl PostgresStore {
    /// Where `subscriber` is, if it has started.
    pub async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "SELECT position FROM {}checkpoints WHERE subscriber = $1",
                    self.names.tables()
                ),
                &[&subscriber],
            )
            .await
            .map_err(failed("cannot read a checkpoint"))?;
        Ok(row.map(|row| row.get::<_, i64>(0) as u64))
    }

    /// Moves `subscriber` from `from` (`None`: it has not started) to `to`; whether it moved,
    /// which it does not if another dispatcher moved it first.
    pub async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let t = self.names.tables();
        let to = bigint("a checkpoint position", to)?;
        let changed = match from {
            None => {
                client
                    .execute(
                        &format!(
                            "INSERT INTO {t}checkpoints (subscriber, position) VALUES ($1, $2)
                             ON CONFLICT (subscriber) DO NOTHING"
                        ),
                        &[&subscriber, &to],
                    )
                    .await
            }
            Some(from) => {
                client
                    .execute(
                        &format!(
                            "UPDATE {t}checkpoints SET position = $3
                             WHERE subscriber = $1 AND position = $2"
                        ),
                        &[&subscriber, &bigint("a checkpoint position", from)?, &to],
                    )
                    .await
            }
        }
        .map_err(failed("cannot move a checkpoint"))?;
        Ok(changed == 1)
    }
}
