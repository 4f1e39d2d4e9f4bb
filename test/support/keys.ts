/**
 * An API key as the contract spells it, stated independently of the implementation's own pattern:
 * `psk_`, the 12-hex-digit key id, `_`, and 43 base64url characters (256 random bits).
 */
export const API_KEY_FORMAT = /^psk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/
