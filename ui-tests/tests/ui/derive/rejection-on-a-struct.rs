use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Rejection)]
pub struct PayRejection {
    pub reason: String,
}

fn main() {}
