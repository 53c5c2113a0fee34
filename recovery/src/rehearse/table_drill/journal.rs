//! What the journal still holds after a position: the drill's check that a recovery from the
//! trusted snapshot can replay to the head (retention and lifecycle rules delete old objects).

use std::collections::BTreeSet;

use tidemark_journal::Journal;
use tidemark_journal::paths;
use tidemark_journal::store::list_all;

/// What the journal holds after a position.
#[derive(Debug, Clone)]
pub struct JournalHeld {
    /// The head's last position (0: no batch).
    pub head: u64,
    /// The first position of the oldest batch from which every batch up to the head is held.
    pub oldest_held: Option<u64>,
    /// The newest batch that is gone (its manifest or its event object), if a needed one is.
    pub gone: Option<String>,
    /// Batches that a replay after the position reads.
    pub batches: u64,
}

impl JournalHeld {
    pub(super) fn detail(&self, after: u64) -> String {
        match &self.gone {
            None => format!(
                "positions {}..={} held in {} batches (the oldest position held without a gap is {})",
                after + 1,
                self.head,
                self.batches,
                self.oldest_held.map_or("none".into(), |p| p.to_string())
            ),
            Some(gone) => format!(
                "{gone}: events after the trusted snapshot's position {after} were removed (a retention or lifecycle rule?); the oldest position still held is {}; a recovery from that snapshot cannot replay to the head {}",
                self.oldest_held.map_or("none".into(), |p| p.to_string()),
                self.head
            ),
        }
    }
}

/// Walks the journal back from its head to the batch holding `after`: every batch after it
/// needs its manifest and its event object, the holder its manifest (the chain's anchor).
pub async fn journal_held(journal: &Journal, after: u64) -> Result<JournalHeld, tidemark_journal::JournalError> {
    let manifests: BTreeSet<u64> = journal.manifest_sequences().await?.into_iter().collect();
    let events: BTreeSet<u64> = list_all(journal.store.as_ref(), paths::EVENTS_PREFIX)
        .await?
        .iter()
        .filter_map(|o| paths::parse_event_key(&o.key))
        .collect();
    let Some(&head_seq) = manifests.iter().next_back() else {
        return Ok(JournalHeld {
            head: 0,
            oldest_held: None,
            gone: None,
            batches: 0,
        });
    };
    let head = journal.read_manifest(head_seq, None).await?.manifest.last_position;
    let mut held = JournalHeld {
        head,
        oldest_held: None,
        gone: None,
        batches: 0,
    };
    let mut seq = head_seq;
    while seq >= 1 {
        if !manifests.contains(&seq) {
            held.gone.get_or_insert(format!(
                "the manifest of batch {seq} ({}) is gone",
                paths::manifest_key(seq)
            ));
            break;
        }
        let m = journal.read_manifest(seq, None).await?.manifest;
        if m.last_position <= after {
            break; // the anchor: its manifest is all a replay needs
        }
        if !events.contains(&seq) {
            held.gone.get_or_insert(format!(
                "the event object of batch {seq} (positions {}..={}, {}) is gone",
                m.first_position, m.last_position, m.object_key
            ));
            break;
        }
        held.oldest_held = Some(m.first_position);
        held.batches += 1;
        seq -= 1;
    }
    Ok(held)
}
