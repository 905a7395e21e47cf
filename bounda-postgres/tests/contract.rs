//! The store contract, on PostgreSQL: each test on a schema of its own on the test server.

bounda::store_contract_tests!(async || {
    bounda_postgres::testing::store("contract", bounda_postgres::Options::default()).await
});
