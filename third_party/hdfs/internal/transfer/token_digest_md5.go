package transfer

// gofl fork: the client side of Hadoop's TOKEN authentication on the
// NameNode's RPC port (SASL DIGEST-MD5 with a delegation token), on the
// DIGEST-MD5 code the DataNode handshake already uses.

import (
	"fmt"

	"github.com/colinmarc/hdfs/v2/internal/sasl"
)

// TokenDigestMD5 answers a NameNode's DIGEST-MD5 challenge with qop "auth".
type TokenDigestMD5 struct {
	d digestMD5Handshake
}

// NewTokenDigestMD5 starts an exchange: authID is the base64 token
// identifier, passwd the base64 token password (Hadoop's
// SaslRpcServer.encodeIdentifier/encodePassword), service and serverID the
// protocol and server ID of the NameNode's TOKEN auth.
func NewTokenDigestMD5(authID []byte, passwd, service, serverID string) *TokenDigestMD5 {
	return &TokenDigestMD5{d: digestMD5Handshake{authID: authID, passwd: passwd, service: service, hostname: serverID}}
}

// Respond answers challenge. Only qop "auth" is supported: a NameNode that
// offers only integrity or privacy (hadoop.rpc.protection) is refused,
// since RPCs would then need DIGEST-MD5 wrapping.
func (t *TokenDigestMD5) Respond(challenge []byte) ([]byte, error) {
	ch, err := sasl.ParseChallenge(challenge)
	if err != nil {
		return nil, err
	}
	for _, q := range ch.Qop {
		if q == sasl.QopAuthentication {
			ch.Qop = sasl.Qops{sasl.QopAuthentication}
			t.d.token = ch
			return t.d.respond()
		}
	}
	return nil, fmt.Errorf("the NameNode wants RPC protection %v; with a delegation token only %q (hadoop.rpc.protection=authentication) is supported", ch.Qop, sasl.QopAuthentication)
}

// Verify checks the server's final "rspauth=..." message.
func (t *TokenDigestMD5) Verify(rspauth []byte) error {
	return t.d.challengeStep2(rspauth)
}
