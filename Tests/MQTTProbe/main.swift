// coaty-mqtt-probe: a tiny helper process for the CoatyMQTT tests.
//
//   coaty-mqtt-probe will URL CLIENT_ID WILL_TOPIC WILL_PAYLOAD
//       connects with a last will, prints "ready" on stdout, then waits to be killed.
//   coaty-mqtt-probe publish URL CLIENT_ID TOPIC PAYLOAD
//       connects, publishes one QoS 1 message, disconnects and exits 0.
//
// Exits 1 with a message on stderr on failure, 2 on a usage error.

import CoatyMQTT

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func writeLine(_ text: String, to descriptor: Int32) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    writeLine("coaty-mqtt-probe: \(message)", to: 2)
    exit(code)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 5 else {
    fail("usage: coaty-mqtt-probe (will|publish) URL CLIENT_ID TOPIC PAYLOAD", code: 2)
}
let (command, url, clientId, topic, payload) = (arguments[0], arguments[1], arguments[2], arguments[3], arguments[4])

do {
    var configuration = try MQTTConfiguration(url: url, clientId: clientId)
    switch command {
    case "will":
        configuration.will = MQTTMessage(topic: topic, payload: Array(payload.utf8), qos: .atLeastOnce)
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        writeLine("ready", to: 1)
        while true { try await Task.sleep(for: .seconds(3600)) }
    case "publish":
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        try await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce)
        await client.disconnect()
    default:
        fail("unknown command \(command)", code: 2)
    }
} catch {
    fail("\(error)")
}
