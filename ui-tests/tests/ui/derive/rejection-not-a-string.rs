use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Rejection)]
pub enum PayRejection {
    #[rejection(42)]
    NotOpen,
}

fn main() {}
