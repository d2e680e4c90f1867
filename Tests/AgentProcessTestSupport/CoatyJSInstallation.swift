// Where the Coaty JS 2.4.1 peer (`agent.js` in ../shared/coaty-js) and Node.js are: shared by the interop tests and
// the viewer's browser test.
import Foundation

/// Where the Coaty JS peer and Node.js are, and whether the interop tests run.
public enum CoatyJSInstallation {
    /// The environment variable that overrides the path of `agent.js`.
    public static let environmentVariable = "COATY_JS_AGENT"

    /// `$COATY_JS_AGENT`, else `<package root>/../shared/coaty-js/agent.js`.
    public static let agentScript: String = {
        if let path = ProcessInfo.processInfo.environment[environmentVariable], !path.isEmpty { return path }
        // #filePath is <package root>/Tests/AgentProcessTestSupport/CoatyJSInstallation.swift.
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return packageRoot.appendingPathComponent("../shared/coaty-js/agent.js").standardizedFileURL.path
    }()

    /// The `node` executable on `PATH`, if any.
    public static let node: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/node"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }()

    /// Whether `agent.js` and `node` are there.
    public static let isInstalled = FileManager.default.fileExists(atPath: agentScript) && node != nil

    /// Whether the interop tests run: the peer and mosquitto are installed, or `CI=true` (where
    /// their absence fails the tests instead of skipping them).
    public static let shouldRun = (isInstalled && BrokerAvailability.hasMosquitto) || BrokerAvailability.isInCI

    /// Why the tests are skipped.
    public static let skipReason = """
        Coaty JS peer not found (agent.js at \(agentScript), node on PATH, mosquitto): set \
        COATY_JS_AGENT to agent.js and run ../shared/coaty-js/install; with CI=true these tests fail instead
        """

    /// The `node` path and `agent.js`, or an error naming `COATY_JS_AGENT` (what fails the tests in CI).
    public static func requireInstalled() throws -> (node: String, script: String) {
        guard FileManager.default.fileExists(atPath: agentScript) else {
            throw TestSupportError(
                "Coaty JS agent.js not found at \(agentScript): set \(environmentVariable) to its path "
                    + "(the peer lives in ../shared/coaty-js; run its install script)"
            )
        }
        guard let node else {
            throw TestSupportError(
                "node is not on PATH; the Coaty JS peer (\(environmentVariable)=\(agentScript)) needs Node.js "
                    + "(apt-get install nodejs, then ../shared/coaty-js/install)"
            )
        }
        return (node, agentScript)
    }
}

