//! Signed JSON Web Tokens (ES256, as kube-apiserver may sign ServiceAccount tokens): the
//! server's signing key, and signing and verifying compact JWTs.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use serde_json::{Value, json};

/// The key ServiceAccount tokens are signed with (ECDSA P-256).
pub(crate) struct SigningKey {
    pair: EcdsaKeyPair,
    /// The key as PKCS#8 DER, for the state file.
    pkcs8: Vec<u8>,
    /// The `kid` header: the public key's SHA-256, as kube names its keys.
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh random key.
    pub(crate) fn generate() -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot generate a signing key".to_string())?;
        Self::from_pkcs8(doc.as_ref().to_vec())
    }

    /// The key saved by [`SigningKey::to_base64`].
    pub(crate) fn from_base64(text: &str) -> Result<SigningKey, String> {
        let der = STANDARD
            .decode(text)
            .map_err(|e| format!("the signing key is not base64: {e}"))?;
        Self::from_pkcs8(der)
    }

    fn from_pkcs8(pkcs8: Vec<u8>) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
            .map_err(|e| format!("the signing key is not a P-256 PKCS#8 key: {e}"))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(SigningKey {
            pair,
            pkcs8,
            kid,
            rng,
        })
    }

    pub(crate) fn to_base64(&self) -> String {
        STANDARD.encode(&self.pkcs8)
    }

    /// A compact JWT of `claims`: header, claims and signature, each base64url.
    pub(crate) fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| "cannot sign a token".to_string())?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }

    /// The claims of `token` if this key signed it; None for anything else (another key,
    /// another algorithm, a changed byte, not a JWT at all).
    pub(crate) fn verify(&self, token: &str) -> Option<Value> {
        let (input, sig) = token.rsplit_once('.')?;
        let (header, claims) = input.split_once('.')?;
        if claims.contains('.') {
            return None;
        }
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.pair.public_key().as_ref())
            .verify(input.as_bytes(), &sig)
            .ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_with_their_key_and_unchanged() {
        let key = SigningKey::generate().expect("key");
        let token = key.sign(&json!({"sub": "x"})).expect("token");
        assert_eq!(key.verify(&token), Some(json!({"sub": "x"})));
        let again = SigningKey::from_base64(&key.to_base64()).expect("reloaded");
        assert_eq!(again.verify(&token), Some(json!({"sub": "x"})));
        let other = SigningKey::generate().expect("key");
        assert_eq!(other.verify(&token), None);
        // The claims changed, the signature kept: refused.
        let forged = key.sign(&json!({"sub": "y"})).expect("token");
        let (head_claims, _) = forged.rsplit_once('.').expect("parts");
        let (_, sig) = token.rsplit_once('.').expect("parts");
        assert_eq!(key.verify(&format!("{head_claims}.{sig}")), None);
        assert_eq!(key.verify("not.a.jwt"), None);
        assert_eq!(key.verify(""), None);
    }
}
