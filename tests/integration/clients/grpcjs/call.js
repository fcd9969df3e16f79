// One unary GetComponentConfig call made with grpc-js (@grpc/grpc-js, pinned with its
// integrity hashes in package-lock.json), the gRPC of Node.js: TLS against the cluster CA for
// the service's name, the token as `authorization`. The request and answer stay bytes
// (makeUnaryRequest with identity serializers), so no .proto is loaded.
//
// Prints one JSON object, {"code": <gRPC status number>, "details": "...", "bytes": <answer
// size>}, and exits 0 when the call ended with a status grpc-js read from the service.
//
//   node call.js --addr 127.0.0.1:8443 --ca ca.pem --server-name api.example --token-file t
'use strict';
const fs = require('fs');
const grpc = require('@grpc/grpc-js');

const PATH = '/akslivepatching.v1.LivePatchingService/GetComponentConfig';

function flags(argv) {
  const out = {component: 'aksNodeController'};
  for (let i = 2; i + 1 < argv.length; i += 2) {
    out[argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = argv[i + 1];
  }
  for (const required of ['addr', 'ca', 'serverName', 'tokenFile']) {
    if (!out[required]) throw new Error('missing --' + required);
  }
  return out;
}

// GetComponentConfigRequest{component_name = 1}: one length-delimited field.
function requestMessage(component) {
  const name = Buffer.from(component, 'utf8');
  return Buffer.concat([Buffer.from([0x0a, name.length]), name]);
}

const args = flags(process.argv);
const credentials = grpc.credentials.createSsl(fs.readFileSync(args.ca));
const client = new grpc.Client(args.addr, credentials, {
  'grpc.ssl_target_name_override': args.serverName,
  'grpc.default_authority': args.serverName,
});
const metadata = new grpc.Metadata();
metadata.add('authorization', fs.readFileSync(args.tokenFile, 'ascii').trim());
const identity = (b) => b;
client.makeUnaryRequest(PATH, identity, identity, requestMessage(args.component), metadata,
                        {deadline: Date.now() + 20000}, (err, answer) => {
  const result = err ? {code: err.code, details: err.details}
                     : {code: 0, details: '', bytes: answer.length};
  console.log(JSON.stringify(result));
  client.close();
  process.exit(err && err.code === grpc.status.UNAVAILABLE ? 1 : 0);
});
