use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Rejection)]
pub enum PayRejection {
    #[rejection("the order is not open")]
    #[rejection("closed")]
    NotOpen,
}

fn main() {}
