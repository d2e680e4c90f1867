import ArgumentParser
import Foundation

/// The `coaty` command-line tool: run Coaty agents from the shell.
@main
struct Coaty: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coaty",
        abstract: "Run Coaty agents from the command line.",
        discussion: """
            Agents share typed objects over an MQTT broker with the Coaty protocol (version 3), \
            interoperable with Coaty JS and CoatySwift. Start with `coaty demo`: it needs no \
            broker and no arguments.

            stdout carries data only: every received event is one JSON object per line, \
            {"event":…,"topic":…,"sourceId":…,"correlationId":… (two-way only),"data":{…}}. \
            Logs and errors go to stderr (--log-level, default warning); observe and record \
            end with one summary line there (received, stored, dropped).

            Every command takes the connection options --broker (default $COATY_BROKER, else \
            mqtt://127.0.0.1:1883; repeat it, or list URLs in $COATY_BROKER separated by commas, for \
            failover brokers tried in order; auto or auto:NAME for the broker found over DNS-SD, see \
            `coaty broker`), --namespace (default $COATY_NAMESPACE, else -), \
            --cross-namespace, --name, --username, --password (or $COATY_PASSWORD), --ca-file, \
            --cert-file, --key-file, --log-level, --connect-timeout (5 s), --keepalive (60 s), --qos (0), \
            --broker-type (standard; rabbitmq for RabbitMQ's MQTT plugin).

            Examples:
              coaty demo
              coaty observe advertise --core-type Identity
              coaty advertise '{"objectType":"com.example.Light","name":"Lamp"}'
              coaty discover --core-types Identity
              coaty call switchLight --params '{"on":true}' --count 1
              coaty respond call switchLight --result '{"on":true}'
              coaty record --db objects.sqlite --verbose
              coaty record --db objects.sqlite --durable   # QoS 1, survives a crash

            Exit codes: 0 success, 1 runtime failure (one line on stderr), 2 usage error.
            """,
        subcommands: [
            Advertise.self, Deadvertise.self, Channel.self, Observe.self, Discover.self, Query.self,
            Update.self, Call.self, Respond.self, Raw.self, Record.self, View.self, BrokerCommand.self, Demo.self,
        ]
    )

    /// Runs the command, mapping usage errors to exit code 2 as the CLI contract requires
    /// (swift-argument-parser uses 64 by default).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            if code == .success || error is ExitCode {
                exit(withError: error)
            }
            // A runtime failure: one clear line on stderr, exit 1.
            let message = error is CLIError ? "\(error)" : fullMessage(for: error)
            FileHandle.standardError.write(Data(("coaty: error: " + oneLine(message) + "\n").utf8))
            Foundation.exit(1)
        }
    }
}
