//! What a runner checks and mends once, before its first pass: that every read model's table
//! takes this build's declaration (or has been rebuilt), that no running instance holds a
//! moment in a state field this build no longer reads (a deadline renamed without an alias, or
//! removed: it would never run, and the next step would drop it), and that every instance's
//! scheduler entry is the one its state says (a deploy may have moved it).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::Error;
use crate::app::App;
use crate::app::Rearm;
use crate::app::processes::rearm::LostMoment;

/// Instances named per lost field in the refusal; the others are counted.
const NAMED: usize = 5;

impl App {
    /// Refuses to run when a running instance's stored state holds a moment in a field this
    /// build's state does not read, naming them; else re-arms the entries that disagree with
    /// their states; and forgets the windows of limits the configuration no longer has. Once per
    /// app: a failure (the store out of reach) is tried again at the next pass.
    pub(crate) async fn start(&self) -> Result<(), Error> {
        // A read model whose table this build cannot keep is rebuilt first.
        if let Some(refusal) = self.read_model_refusal() {
            return Err(refusal);
        }
        if self.inner.started.load(Ordering::SeqCst) {
            return Ok(());
        }
        // A limit the configuration no longer has holds nothing from now on.
        let now = self.clock().now();
        if let Some(limits) = self.store().capabilities().limits {
            for window in limits.limit_windows(now).await? {
                let key = &window.key;
                if self.config().limits.get(key.kind, &key.name).is_none() {
                    limits.drop_limit(key).await?;
                    tracing::info!(limit = %key, "a limit no longer configured was dropped");
                }
            }
        }
        if self.inner.processes.is_empty() {
            self.inner.started.store(true, Ordering::SeqCst);
            return Ok(());
        }
        let survey = self.survey(Rearm::All).await?;
        if !survey.lost.is_empty() {
            return Err(Error::Configuration {
                message: refusal(&survey.lost),
            });
        }
        let found = survey.drifts.len();
        let rearmed = self.rearm_drifted(survey.drifts).await?;
        self.note_drifted((found - rearmed.len()) as u64);
        self.inner.started.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Why the app does not run: each process and field whose moments would be lost, with the
/// instances that hold them.
fn refusal(lost: &[LostMoment]) -> String {
    let mut by_field: BTreeMap<(&str, &str), Vec<&LostMoment>> = BTreeMap::new();
    for moment in lost {
        by_field
            .entry((moment.process, moment.field.as_str()))
            .or_default()
            .push(moment);
    }
    let fields: Vec<String> = by_field
        .iter()
        .map(|((process, field), moments)| {
            let mut named: Vec<String> = moments
                .iter()
                .take(NAMED)
                .map(|moment| format!("{} at {}", moment.instance, moment.at))
                .collect();
            if moments.len() > NAMED {
                named.push(format!("{} more", moments.len() - NAMED));
            }
            format!(
                "`{process}` does not read its stored field `{field}`, where {} open instance(s) hold a moment ({})",
                moments.len(),
                named.join(", ")
            )
        })
        .collect();
    format!(
        "{}: a deadline renamed without an alias, or removed, would never run, and each instance's next step would drop its moment (as it would any other moment stored there). Keep it with `#[serde(alias = \"..\")]` on the field it became, or migrate the state (`#[process(version = .., migrate = [..])]`) and say in its `From` what becomes of it; nothing has run",
        fields.join("; ")
    )
}
