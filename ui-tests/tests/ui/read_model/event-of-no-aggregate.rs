use bounda::prelude::*;

/// A payload of no aggregate: never stored in a stream, so never projected.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Newsletter {
    pub subject: String,
}

#[read_model(name = "newsletters")]
pub struct Newsletters {
    #[key]
    pub subject: String,
}

#[read_model]
impl Newsletters {
    async fn on_newsletter(event: Projected<'_, Newsletter>, table: &mut Table<'_, Self>) -> Result<()> {
        let _ = (event, table);
        Ok(())
    }
}

fn main() {}
