// Reading agent information from a configuration (`common.agentInfo`), with the configuration's errors.

import CoatyCommunication
import CoatyFilter
public import CoatyModel

extension AgentInfo {
    /// Reads agent information with the checks of Coaty JS (`CoreTypes._isAgentInfo`): the three
    /// parts are objects, and `name`, `version`, `buildDate`, `buildMode` and `serviceHost` are
    /// strings.
    ///
    /// - Parameters:
    ///   - json: the information.
    ///   - path: the field path of `json` for errors, e.g. `common.agentInfo`.
    /// - Throws: ``AgentConfigurationError`` naming the bad member.
    public init(json: JSONValue, at path: String = "agentInfo") throws(AgentConfigurationError) {
        let object = try ConfigurationReader.object(json, at: path)
        func part(_ key: String, _ members: [String]) throws(AgentConfigurationError) -> (JSONObject, [String]) {
            let partPath = ConfigurationReader.path(path, key)
            guard let part = try ConfigurationReader.object(object, key, at: path) else {
                throw AgentConfigurationError(field: partPath, reason: "is missing; it must be an object")
            }
            var values: [String] = []
            for member in members {
                guard let value = try ConfigurationReader.string(part, member, at: partPath) else {
                    throw AgentConfigurationError(
                        field: ConfigurationReader.path(partPath, member),
                        reason: "is missing; it must be a string"
                    )
                }
                values.append(value)
            }
            return (AgentInfo.removing(members, from: part), values)
        }
        let (packageCustom, package) = try part("packageInfo", ["name", "version"])
        let (buildCustom, build) = try part("buildInfo", ["buildDate", "buildMode"])
        let (configCustom, config) = try part("configInfo", ["serviceHost"])
        var packageInfo = AgentPackageInfo(name: package[0], version: package[1])
        packageInfo.custom = packageCustom
        var buildInfo = AgentBuildInfo(buildDate: build[0], buildMode: build[1])
        buildInfo.custom = buildCustom
        var configInfo = AgentConfigInfo(serviceHost: config[0])
        configInfo.custom = configCustom
        self.init(packageInfo: packageInfo, buildInfo: buildInfo, configInfo: configInfo)
        custom = AgentInfo.removing(["packageInfo", "buildInfo", "configInfo"], from: object)
    }
}
