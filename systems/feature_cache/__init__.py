"""The feature-cache system: graph in memory, feature rows on disk behind a cache (:mod:`.feature_cache_system`),
its policies (:mod:`.policies`) and its page-cache-bypassing reads (:mod:`.direct_io`)."""
