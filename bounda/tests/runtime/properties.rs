//! Properties of the parsers and codecs (issue 11): what reads back as written, and what never
//! panics on any input, with errors that name it.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::config::Config;
use bounda::prelude::*;
use bounda::{EventSet, RecordedEvent};
use proptest::prelude::*;
use support::storefront::{Order, OrderEvent, OrderPayment};

/// The dotted paths of `value`'s leaves (`dispatcher.backoff.baseDelay`).
fn leaves(value: &serde_json::Value, prefix: &str) -> Vec<String> {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => map
            .iter()
            .flat_map(|(key, value)| {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaves(value, &path)
            })
            .collect(),
        _ => vec![prefix.to_owned()],
    }
}

/// Any JSON value, a few levels deep.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_duration_reads_back_as_it_prints(ms in 0u64..=i64::MAX as u64) {
        let duration = millis(ms);
        let printed = duration.to_string();
        prop_assert_eq!(printed.parse::<Duration>().unwrap(), duration, "{}", printed);
    }

    #[test]
    fn any_string_parses_as_a_duration_or_an_error_naming_it(input in ".{0,24}") {
        if let Err(error) = input.parse::<Duration>() {
            // Quoted, so an empty or one-letter input is found as itself, not anywhere.
            let text = error.to_string();
            prop_assert!(text.contains(&format!("`{input}`")) || text.contains(&format!("{input:?}")), "{}", text);
        }
    }

    #[test]
    fn a_duration_like_string_never_panics(input in "[0-9]{0,22}(\\.[0-9]{0,6})?(ms|s|m|h|d|x)?") {
        let _ = input.parse::<Duration>();
        let _ = Duration::parse_const(&input);
    }

    #[test]
    fn an_instant_reads_back_as_it_prints(ms in -62_167_219_200_000i64..=253_402_300_799_999i64) {
        let instant = Instant::from_millis(ms).unwrap();
        let printed = instant.to_string();
        prop_assert_eq!(printed.parse::<Instant>().unwrap(), instant, "{}", printed);
        let json = serde_json::to_value(instant).unwrap();
        prop_assert_eq!(serde_json::from_value::<Instant>(json).unwrap(), instant);
    }

    #[test]
    fn any_string_parses_as_an_instant_or_an_error_naming_it(input in ".{0,40}") {
        if let Err(error) = input.parse::<Instant>() {
            let text = error.to_string();
            prop_assert!(text.contains(&format!("`{input}`")) || text.contains(&format!("{input:?}")), "{}", text);
        }
    }

    #[test]
    fn an_rfc3339_like_string_never_panics(
        input in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})"
    ) {
        if let Ok(instant) = input.parse::<Instant>() {
            prop_assert_eq!(instant.to_string().parse::<Instant>().unwrap(), instant);
        }
    }

    #[test]
    fn any_payload_decodes_as_an_event_or_an_error_naming_it(
        event_type in prop_oneof![Just("OrderPlaced".to_owned()), Just("OrderPaid".to_owned()), "[A-Za-z]{1,12}"],
        payload in json(),
    ) {
        let stored = RecordedEvent {
            id: "e-1".into(),
            aggregate_type: "Order".into(),
            aggregate_id: "o-1".into(),
            event_type: event_type.clone(),
            version: 1,
            position: 1,
            timestamp: Instant::from_millis(0).unwrap(),
            payload,
            metadata: bounda::store::Metadata::of_command("c-1"),
            unreadable: None,
        };
        match OrderEvent::read(&stored) {
            Ok(event) => prop_assert_eq!(event.type_name(), event_type.as_str()),
            Err(error) => prop_assert!(error.to_string().contains(&event_type), "{}", error),
        }
    }

    #[test]
    fn any_stored_event_folds_or_fails_with_an_error_naming_it(payload in json()) {
        let event = RecordedEvent {
            id: "e-1".into(),
            aggregate_type: "Order".into(),
            aggregate_id: "o-1".into(),
            event_type: "OrderPlaced".into(),
            version: 1,
            position: 1,
            timestamp: Instant::from_millis(0).unwrap(),
            payload,
            metadata: bounda::store::Metadata::of_command("c-1"),
            unreadable: None,
        };
        if let Err(error) = bounda::fold::<Order>(&[event]) {
            prop_assert!(error.to_string().contains("OrderPlaced"), "{}", error);
        }
    }

    #[test]
    fn a_configuration_with_any_value_at_any_key_reads_or_names_that_key(
        leaf in 0usize..64,
        value in json(),
    ) {
        let mut config = serde_json::to_value(Config::default()).unwrap();
        let paths = leaves(&config, "");
        let path = &paths[leaf % paths.len()];
        *config.pointer_mut(&format!("/{}", path.replace('.', "/"))).unwrap() = value;
        if let Err(error) = Config::from_json(&config.to_string()) {
            // At the key, or within the value put there.
            let within = error.path == *path || error.path.starts_with(&format!("{path}."));
            prop_assert!(within, "{} at {}", error, path);
        }
    }

    #[test]
    fn any_text_reads_as_a_configuration_or_an_error(text in ".{0,64}") {
        let _ = Config::from_json(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    // A process's history is read back from its lifecycle events: whatever a stored one holds,
    // reading the instance answers or fails with an error, never a panic.
    #[test]
    fn any_stored_lifecycle_event_reads_or_fails_without_panic(
        event_type in prop_oneof![
            Just("ProcessStarted".to_owned()),
            Just("ProcessHandled".to_owned()),
            Just("ProcessDeadlineReached".to_owned()),
            Just("ProcessFailed".to_owned()),
            Just("ProcessEventParked".to_owned()),
            "[A-Za-z]{1,12}",
        ],
        payload in json(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = bounda::App::builder_shared(support::database::store().await)
                .only_listed()
                .process::<OrderPayment>()
                .build().await
                .unwrap();
            let odd = bounda::store::WriteSet {
                appends: vec![bounda::store::Append {
                    aggregate_type: "process:OrderPayment".into(),
                    aggregate_id: "o-1".into(),
                    expected_version: 0,
                    events: vec![bounda::store::NewEvent {
                        id: "odd".into(),
                        event_type,
                        payload,
                        timestamp: Instant::from_millis(0).unwrap(),
                        metadata: bounda::store::Metadata::of_command("x"),
                    }],
                }],
                ..Default::default()
            };
            app.store().commit(&odd).await.unwrap();
            let _ = app.process_instance::<OrderPayment>("o-1").await;
            let _ = app.unreadable_states().await;
            let _ = app.pending_deadlines().await;
        });
    }

    // The same with a real lifecycle event changed at one place: deeper than random JSON gets.
    #[test]
    fn a_stored_lifecycle_event_changed_anywhere_reads_or_fails_without_panic(
        which in 0usize..8,
        leaf in 0usize..64,
        value in json(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = TestApp::new(
                bounda::App::builder_shared(support::database::store().await)
                    .only_listed()
                    .process::<OrderPayment>(),
            ).await
            .unwrap()
            .expecting_letters();
            app.dispatch(support::storefront::PlaceOrder { order_id: "o-1".into(), total: 1 })
                .await
                .unwrap();
            app.advance(hours(25)).await.unwrap();
            let store = app.app().store();
            let stream = store.read_stream("process:OrderPayment", "o-1").await.unwrap();
            let original = &stream[which % stream.len()];
            let mut payload = original.payload.clone();
            let paths = leaves(&payload, "");
            let path = &paths[leaf % paths.len()];
            if let Some(slot) = payload.pointer_mut(&format!("/{}", path.replace('.', "/"))) {
                *slot = value;
            }
            let changed = bounda::store::WriteSet {
                appends: vec![bounda::store::Append {
                    aggregate_type: "process:OrderPayment".into(),
                    aggregate_id: "o-1".into(),
                    expected_version: stream.len() as u64,
                    events: vec![bounda::store::NewEvent {
                        id: "changed".into(),
                        event_type: original.event_type.clone(),
                        payload,
                        timestamp: app.now(),
                        metadata: original.metadata.clone(),
                    }],
                }],
                ..Default::default()
            };
            store.commit(&changed).await.unwrap();
            let _ = app.app().process_instance::<OrderPayment>("o-1").await;
            let _ = app.app().unreadable_states().await;
            let _ = app.app().pending_deadlines().await;
            let _ = app.advance(days(3)).await;
        });
    }
}
