package rpc

// gofl fork: Hadoop's TOKEN authentication (SASL DIGEST-MD5 with a
// delegation token) on the NameNode's RPC port, as Hadoop's SaslRpcClient
// does it: the token identifier in base64 is the user name, the token
// password in base64 the password, and the NameNode's NEGOTIATE carries
// the first challenge.

import (
	"encoding/base64"
	"errors"

	hadoop "github.com/colinmarc/hdfs/v2/internal/protocol/hadoop_common"
	"github.com/colinmarc/hdfs/v2/internal/transfer"
)

var errTokenNotSupported = errors.New("the namenode does not offer TOKEN (DIGEST-MD5) authentication")

func (c *NamenodeConnection) doTokenHandshake() error {
	err := c.writeSaslRequest(&hadoop.RpcSaslProto{State: hadoop.RpcSaslProto_NEGOTIATE.Enum()})
	if err != nil {
		return err
	}
	resp, err := c.readSaslResponse(hadoop.RpcSaslProto_NEGOTIATE)
	if err != nil {
		return err
	}
	var auth *hadoop.RpcSaslProto_SaslAuth
	for _, m := range resp.GetAuths() {
		if m.GetMethod() == "TOKEN" && m.GetMechanism() == "DIGEST-MD5" {
			auth = m
		}
	}
	if auth == nil {
		return errTokenNotSupported
	}
	d := transfer.NewTokenDigestMD5([]byte(base64.StdEncoding.EncodeToString(c.tokenIdentifier)),
		base64.StdEncoding.EncodeToString(c.tokenPassword), auth.GetProtocol(), auth.GetServerId())

	challenge := auth.GetChallenge()
	init := &hadoop.RpcSaslProto{
		State: hadoop.RpcSaslProto_INITIATE.Enum(),
		Auths: []*hadoop.RpcSaslProto_SaslAuth{{Method: auth.Method, Mechanism: auth.Mechanism,
			Protocol: auth.Protocol, ServerId: auth.ServerId}},
	}
	if len(challenge) == 0 {
		// No challenge with the NEGOTIATE: ask for one.
		if err := c.writeSaslRequest(init); err != nil {
			return err
		}
		if resp, err = c.readSaslResponse(hadoop.RpcSaslProto_CHALLENGE); err != nil {
			return err
		}
		challenge = resp.GetToken()
		init = &hadoop.RpcSaslProto{State: hadoop.RpcSaslProto_RESPONSE.Enum()}
	}
	if init.Token, err = d.Respond(challenge); err != nil {
		return err
	}
	if err := c.writeSaslRequest(init); err != nil {
		return err
	}
	if resp, err = c.readSaslResponse(hadoop.RpcSaslProto_SUCCESS); err != nil {
		return err
	}
	return d.Verify(resp.GetToken())
}
