// hello-service: a service agent. It answers a Discover for its Greeter object (found by its
// externalId) and Calls of the operation `com.example.hello.greet` with a greeting.
//
//   swift run hello-service [--broker mqtt://127.0.0.1:1883] [--count N]
//
// Then run `swift run hello-client`, or call it with the CLI:
//   coaty call com.example.hello.greet --params '{"name":"Ada"}'

import ArgumentParser
import CoatyKit
import Foundation

@main
struct HelloService: AsyncParsableCommand {
    @Option(help: "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT; $COATY_BROKER sets the default.")
    var broker = ProcessInfo.processInfo.environment["COATY_BROKER"] ?? "mqtt://127.0.0.1:1883"

    @Option(help: "Exit after answering this many calls (default: run until interrupted).")
    var count: Int?

    func run() async throws {
        let agent = try CommunicationManager.mqtt(url: broker, identity: Identity(name: "Hello service"))
        // The object that stands for the service; clients discover it by its externalId.
        let greeter = BaseObject(name: "Greeter", externalId: "com.example.hello.greeter")

        // Observe before starting: start() advertises the identity once the broker acknowledged
        // these subscriptions, so that Advertise means "ready".
        let discovers = try agent.observeDiscover()
        let calls = try agent.observeCall(operation: "com.example.hello.greet")
        try await agent.start()
        print("Hello service \(agent.identity.objectId) is ready on \(broker)")

        // Discover → Resolve, in the background.
        let resolving = Task {
            for await discover in discovers where discover.data.externalId == greeter.externalId {
                try? await discover.resolve(object: greeter)
                print("resolved a Discover from \(discover.sourceId)")
            }
        }
        // Call → Return: a greeting, or Coaty's predefined "Invalid params" error.
        var answered = 0
        for await call in calls {
            if let name = call.data.parameter("name")?.stringValue {
                try await call.returnResult(.string("Hello, \(name)!"))
                print("greeted \(name)")
            } else {
                try await call.returnError(.invalidParameters)
            }
            answered += 1
            if answered == count { break }
        }
        resolving.cancel()
        await agent.stop()  // deadvertises the identity, then disconnects
    }
}
