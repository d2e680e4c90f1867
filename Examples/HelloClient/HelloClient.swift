// hello-client: finds the hello service by Discover, calls its greet operation, prints what it
// got and exits (0 on success; 1 when no service answers in time).
//
//   swift run hello-service &
//   swift run hello-client [--broker mqtt://127.0.0.1:1883] [--name Ada] [--timeout 10]

import ArgumentParser
import CoatyKit
import Foundation

@main
struct HelloClient: AsyncParsableCommand {
    @Option(help: "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT; $COATY_BROKER sets the default.")
    var broker = ProcessInfo.processInfo.environment["COATY_BROKER"] ?? "mqtt://127.0.0.1:1883"

    @Option(help: "Who to greet.")
    var name = "Coaty"

    @Option(help: "Seconds to wait for each answer (Coaty itself never times out).")
    var timeout: Double = 10

    func run() async throws {
        let agent = try CommunicationManager.mqtt(url: broker, identity: Identity(name: "Hello client"))
        try await agent.start()
        do {
            try await greet(with: agent)
            await agent.stop()
        } catch {
            await agent.stop()
            throw error
        }
    }

    func greet(with agent: CommunicationManager) async throws {
        // Discover → Resolve. Requests are lazy: first(timeout:) publishes and waits for one answer.
        let discovery = agent.publishDiscover(.externalId("com.example.hello.greeter"))
        guard let resolve = try await discovery.first(timeout: .seconds(timeout)), let greeter = resolve.data.object
        else { throw HelloError("no hello service answered within \(timeout) s at \(broker)") }
        print("discovered \(greeter.name) \(greeter.objectId) of agent \(resolve.sourceId)")

        // Call → Return: the result is any JSON value, or an error with a code and a message.
        let call = try agent.publishCall(
            "com.example.hello.greet",
            data: CallEventData(parameters: ["name": .string(name)])
        )
        guard let answer = try await call.first(timeout: .seconds(timeout)) else {
            throw HelloError("no answer to the greet call within \(timeout) s")
        }
        switch answer.data.outcome {
        case .success(let greeting): print("result: \(greeting.stringValue ?? "\(greeting)")")
        case .failure(let error): throw HelloError("the service returned an error: \(error)")
        }
    }
}

/// A failure printed by ArgumentParser as `Error: …`, with exit code 1.
struct HelloError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
