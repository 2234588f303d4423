//! rein-plugins: rein's retry plugins.
