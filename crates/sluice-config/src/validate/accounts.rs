//! Provider accounts: a quota several deployments share (`[[accounts]]`, and `account` on
//! a deployment), above the deployments on the reservation path.

use super::*;

impl Validator<'_> {
    pub(super) fn accounts(&self, raw: &[RawAccount]) -> Result<Vec<Account>> {
        self.unique("accounts", raw.iter().map(|a| &a.name))?;
        raw.iter()
            .enumerate()
            .map(|(i, a)| {
                // Like a deployment's, an account's limits mirror the provider's.
                let limits = self.limits(ScopeKind::Account, &format!("accounts[{i}].limits"), &a.limits)?;
                Ok(Account { name: Arc::from(a.name.get_ref().as_str()), limits })
            })
            .collect()
    }

    /// Resolves each deployment's `account` to its index.
    pub(super) fn deployment_accounts(
        &self,
        raw: &[RawDeployment],
        accounts: &[Account],
        deployments: &mut [Deployment],
    ) -> Result<()> {
        let known = by_name(accounts, |a| &*a.name);
        for (i, (d, deployment)) in raw.iter().zip(deployments.iter_mut()).enumerate() {
            if let Some(name) = &d.account {
                deployment.account =
                    Some(self.reference(&format!("deployments[{i}].account"), name, &known, "account")?);
            }
        }
        Ok(())
    }
}
