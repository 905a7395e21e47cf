//! The dispatcher's pass over the `policies` subscriber: each event to the policies that take
//! it, a delayed policy's run scheduled instead.

use std::sync::Arc;

use crate::app::RejectionRecord;
use crate::app::policy_run::{PolicyRun, SchedulePolicyRun};
use crate::app::subscriber::Delivery;
use crate::app::{App, POLICIES};
use crate::{Error, Instant};

impl App {
    /// One dispatcher pass at `now`. Returns whether anything moved; rejections of the
    /// attempts that committed are added to `rejections` in order.
    pub(crate) async fn policy_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        // No policy, no runner: nothing reads, checkpoints or wakes up (spec 32).
        if self.inner.policies.is_empty() {
            return Ok(false);
        }
        self.subscriber_pass(POLICIES, "policy", now, rejections, |event| {
            self.policies()
                .filter(|policy| event.has_key(policy.key()))
                .map(|policy| Delivery {
                    handler: policy.name(),
                    lane: event.aggregate_id.clone(),
                    work: match policy.delay() {
                        Some(delay) => Box::new(SchedulePolicyRun {
                            policy: policy.name(),
                            aggregate: policy.key().aggregate,
                            event: event.clone(),
                            execute_at: event.timestamp + delay,
                        }),
                        None => Box::new(PolicyRun::new(Arc::clone(policy), event.clone())),
                    },
                })
                .collect()
        })
        .await
    }
}
